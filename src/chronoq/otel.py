"""OpenTelemetry traces of enqueues and attempts, after the messaging semantic conventions.

Install the extra (`pip install 'chronoq[otel]'`: the OpenTelemetry API only; your application
brings the SDK and its exporter) and instrument the app, in the producer's process and in the
workers' (the module that defines the app is imported by both)::

    from chronoq.otel import instrument
    instrument(app)                    # the global tracer provider, or tracer_provider=...

```
 producer process                                   worker process (any, any time later)
 ┌─ your span (an HTTP request) ─────────┐
 │  └─ "send emails"  PRODUCER ──────────┼─► job row: trace_context {traceparent, tracestate}
 └────────────────────────────────────────┘                 │  read at each claim
                                         "process emails" CONSUMER, attempt 1 ── link ──┐
                                         "process emails" CONSUMER, attempt 2 ── link ──┴─► send
                                           └─ your handler's own spans (children)
```

- Enqueue: one `send {queue}` span of kind PRODUCER around the insert (a batch: one span for
  all its jobs, with `messaging.batch.message_count`), a child of the span current at the
  call. Its context, injected by the configured propagator (W3C `traceparent` and
  `tracestate` by default), is stored with each job: it is each job's creation context.
- Attempt: one `process {queue}` span of kind CONSUMER per attempt, current while the handler
  runs (a sync handler's thread included), so the handler's own spans are its children. It
  ends when the handler returns: in error, with the exception recorded, when the attempt
  failed (retried or dead).
- Link or child: by default (`propagation="link"`) each attempt starts a trace of its own and
  links to its job's creation context, as the conventions recommend for consumers: a job may
  run hours after the request that enqueued it, and again on each retry, and a child would
  stretch that request's trace across all of them. `propagation="child"` makes each attempt a
  child of the creation context instead, for backends that show links poorly. Either way,
  every retry points at the same enqueue.

Attributes: `messaging.system` "chronoq", `messaging.operation.name` and
`messaging.operation.type` ("send", "process"), `messaging.destination.name` (the queue),
`messaging.message.id` (the job id), and chronoq's own `chronoq.job.task`,
`chronoq.job.attempt`, `chronoq.job.outcome`, `chronoq.job.created` (false: an enqueue key
returned an existing job) and `chronoq.worker.id`.

Nothing here runs unless `instrument` is called: the worker emits `AttemptBegan` only when an
observer subscribed to it, and the app's enqueue tests one attribute.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by tests/packaging
    raise ImportError("chronoq.otel needs the otel extra: pip install 'chronoq[otel]'") from exc

from chronoq.core.jobs import Job, Outcome
from chronoq.observability.events import AttemptBegan, HandlerReturned, Subscription
from chronoq.observability.tracing import Sent
from chronoq.storage.base import JobInsertParams, JobInsertResult

if TYPE_CHECKING:
    from chronoq.app import App

__all__ = ["Tracing", "instrument", "uninstrument"]

SYSTEM = "chronoq"
_FAILED = frozenset({Outcome.RETRY, Outcome.DEAD})
# The span of the attempt running on this asyncio task, and the token that made it current.
_Held = tuple[Span, "contextvars.Token[otel_context.Context]"]
_attempt: contextvars.ContextVar[_Held | None] = contextvars.ContextVar(
    "chronoq_otel_attempt", default=None
)


def instrument(
    app: App, *, tracer_provider: trace.TracerProvider | None = None, propagation: str = "link"
) -> Tracing:
    """Trace `app`'s enqueues and the attempts of every worker running it."""
    tracing = Tracing(tracer_provider, propagation)
    uninstrument(app)
    app.tracing = tracing
    app.observers.subscribe(tracing)
    return tracing


def uninstrument(app: App) -> None:
    """Stop tracing `app` (for workers started from now on, and enqueues)."""
    for observer in app.observers:
        if isinstance(observer, Tracing):
            app.observers.unsubscribe(observer)
    app.tracing = None


class Tracing:
    """The producer's span around each enqueue (`App.tracing`) and an observer that makes one
    span per attempt (`AttemptBegan` to `HandlerReturned`)."""

    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None, propagation: str = "link"
    ) -> None:
        if propagation not in ("link", "child"):
            raise ValueError(f"propagation must be 'link' or 'child', got {propagation!r}")
        from chronoq import __version__

        self.tracer = trace.get_tracer("chronoq", __version__, tracer_provider)
        self.propagation = propagation

    # -- the producer -----------------------------------------------------------------------

    @contextmanager
    def sending(self, jobs: Sequence[JobInsertParams]) -> Iterator[Sent]:
        queues = {job.queue for job in jobs}
        queue = queues.pop() if len(queues) == 1 else None
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
        }
        if queue is not None:
            attributes["messaging.destination.name"] = queue
        if len(jobs) != 1:
            attributes["messaging.batch.message_count"] = len(jobs)
        name = f"send {queue}" if queue is not None else "send"
        with self.tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            stamp = json.dumps(carrier, separators=(",", ":")) if carrier else None
            for job in jobs:
                job.trace_context = stamp
            yield lambda results: _sent(span, jobs, results)

    # -- the consumer -----------------------------------------------------------------------

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(AttemptBegan, self._began),
            Subscription(HandlerReturned, self._returned),
        )

    def _began(self, event: AttemptBegan) -> None:
        job = event.job
        creation = _creation_context(job)
        links = []
        parent = None
        if creation is not None:
            if self.propagation == "child":
                parent = creation
            else:
                link_to = trace.get_current_span(creation).get_span_context()
                links.append(Link(link_to))
        span = self.tracer.start_span(
            f"process {job.queue}",
            context=parent if parent is not None else otel_context.Context(),
            kind=SpanKind.CONSUMER,
            links=links,
            attributes=_process_attributes(job, event.worker_id),
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        _attempt.set((span, token))

    def _returned(self, event: HandlerReturned) -> None:
        held = _attempt.get()
        if held is None:
            return  # an attempt that began before tracing was on
        span, token = held
        _attempt.set(None)
        otel_context.detach(token)
        _end_attempt(span, event.outcome, event.exception)


def _sent(span: Span, jobs: Sequence[JobInsertParams], results: Sequence[JobInsertResult]) -> None:
    if len(results) == 1:
        span.set_attribute("messaging.message.id", str(results[0].id))
        span.set_attribute("chronoq.job.created", results[0].created)
        span.set_attribute("chronoq.job.task", jobs[0].task)


def _creation_context(job: Job) -> otel_context.Context | None:
    """The context the job was enqueued in, if it was traced and its record reads as one."""
    if not job.trace_context:
        return None
    extracted = propagate.extract(job.trace_context)
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted


def _process_attributes(job: Job, worker_id: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "chronoq.job.task": job.task,
        "chronoq.job.attempt": job.attempts,
        "chronoq.worker.id": worker_id,
    }


def _end_attempt(span: Span, outcome: Outcome | None, exception: BaseException | None) -> None:
    if outcome is not None:
        span.set_attribute("chronoq.job.outcome", outcome.value)
    if outcome in _FAILED or outcome is None:
        if exception is not None:
            span.record_exception(exception)
            description = f"{type(exception).__name__}: {exception}"
        else:
            description = "attempt failed" if outcome is not None else "attempt abandoned"
        span.set_status(Status(StatusCode.ERROR, description))
    span.end()
