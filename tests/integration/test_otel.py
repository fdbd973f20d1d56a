"""OpenTelemetry (chronoq.otel) with the real SDK: spans read from its in-memory exporter.

The enqueue's PRODUCER span and each attempt's CONSUMER span follow the messaging semantic
conventions; the job carries the enqueue's trace context, so every attempt, in another process
and on every retry, links to (or with propagation="child", is a child of) that same span.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import chronoq
from chronoq.otel import instrument, uninstrument
from chronoq.storage.base import JobListParams
from chronoq.storage.sqlstore import BULK_THRESHOLD
from chronoq.testing import drain

DEADLINE = 60.0


class Traces:
    """A tracer provider of the SDK whose finished spans stay in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = self.exporter.get_finished_spans()
        return [span for span in found if name is None or span.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.spans(name)
        return span


@pytest.fixture
def traces() -> Iterator[Traces]:
    made = Traces()
    yield made
    made.provider.shutdown()


@pytest.fixture
def app(dsn: str, traces: Traces) -> Iterator[chronoq.App]:
    with chronoq.App(dsn) as application:
        application.migrate()
        instrument(application, tracer_provider=traces.provider)
        yield application


def _ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def _linked(span: ReadableSpan) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


def _flaky_task(app: chronoq.App, traces_provider: Any) -> Any:
    """A task that fails its first attempt (a retry at once) and opens a span of its own in
    its second."""
    inner = traces_provider.get_tracer("handler")

    @app.task(name="flaky", queue="emails", max_attempts=3)
    def flaky(ctx: chronoq.JobContext, to: str) -> None:
        if ctx.attempt == 1:
            try:
                raise ValueError(f"mail server refused {to}")
            except ValueError as exc:
                raise chronoq.Retry(delay=0) from exc
        with inner.start_as_current_span("render"):
            pass

    return flaky


# -- in one process -----------------------------------------------------------------------------


def test_enqueue_is_a_producer_span_inside_the_callers_trace(
    app: chronoq.App, traces: Traces
) -> None:
    flaky = _flaky_task(app, traces.provider)
    caller = traces.provider.get_tracer("caller")
    with caller.start_as_current_span("POST /signup") as request:
        enqueued = flaky.defer(to="a@example.com")
    send = traces.one("send emails")
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "chronoq",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "emails",
        "messaging.message.id": str(enqueued.id),
        "chronoq.job.created": True,
        "chronoq.job.task": "flaky",
    }
    job = app.get_job(enqueued.id)
    assert job is not None and job.trace_context is not None
    trace_id, span_id = _ids(send)
    assert job.trace_context["traceparent"].startswith(f"00-{trace_id:032x}-{span_id:016x}-")


def test_each_attempt_is_a_consumer_span_linked_to_the_enqueue(
    app: chronoq.App, traces: Traces
) -> None:
    flaky = _flaky_task(app, traces.provider)
    enqueued = flaky.defer(to="a@example.com")
    assert drain(app).done == 1
    send = traces.one("send emails")
    first, second = sorted(traces.spans("process emails"), key=lambda s: s.start_time or 0)
    for attempt, span in enumerate((first, second), start=1):
        assert span.kind is SpanKind.CONSUMER
        assert span.parent is None  # a trace of its own, linked to the enqueue's
        assert _linked(span) == [_ids(send)]
        attributes = dict(span.attributes or {})
        assert attributes["messaging.system"] == "chronoq"
        assert attributes["messaging.operation.type"] == "process"
        assert attributes["messaging.operation.name"] == "process"
        assert attributes["messaging.destination.name"] == "emails"
        assert attributes["messaging.message.id"] == str(enqueued.id)
        assert attributes["chronoq.job.attempt"] == attempt
        assert attributes["chronoq.job.task"] == "flaky"
    assert first.status.status_code is StatusCode.ERROR
    assert dict(first.attributes or {})["chronoq.job.outcome"] == "retry"
    [event] = first.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"].endswith("Retry")
    assert second.status.status_code is StatusCode.UNSET
    assert dict(second.attributes or {})["chronoq.job.outcome"] == "done"
    render = traces.one("render")
    assert render.parent is not None and render.parent.span_id == _ids(second)[1]


def test_a_dead_attempt_records_the_exception(app: chronoq.App, traces: Traces) -> None:
    @app.task(max_attempts=1)
    def broken() -> None:
        raise KeyError("no such template")

    broken.defer()
    assert drain(app).dead == 1
    span = traces.one("process default")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "KeyError: 'no such template'"
    [event] = span.events
    assert dict(event.attributes or {})["exception.type"] == "KeyError"
    assert dict(span.attributes or {})["chronoq.job.outcome"] == "dead"


def test_an_async_handler_runs_inside_its_attempt_span(app: chronoq.App, traces: Traces) -> None:
    seen: list[int] = []

    @app.task
    async def fetch() -> None:
        await asyncio.sleep(0)
        seen.append(trace.get_current_span().get_span_context().span_id)

    fetch.defer()
    assert drain(app).done == 1
    assert seen == [_ids(traces.one("process default"))[1]]


def test_child_propagation_puts_every_attempt_in_the_enqueue_trace(
    dsn: str, traces: Traces
) -> None:
    with chronoq.App(dsn) as app:
        app.migrate()
        instrument(app, tracer_provider=traces.provider, propagation="child")
        _flaky_task(app, traces.provider).defer(to="a@example.com")
        assert drain(app).done == 1
    send = traces.one("send emails")
    attempts = traces.spans("process emails")
    assert len(attempts) == 2
    for span in attempts:
        assert span.parent is not None and span.parent.span_id == _ids(send)[1]
        assert _ids(span)[0] == _ids(send)[0]
        assert span.links == ()


@pytest.mark.parametrize(("count", "keyed"), [(4, True), (BULK_THRESHOLD + 1, False)])
def test_a_batch_is_one_send_span_whose_context_every_job_carries(
    app: chronoq.App, traces: Traces, count: int, keyed: bool
) -> None:
    # Keyed: one multi-row insert; keyless and large: COPY on PostgreSQL, streamed.
    specs = [chronoq.JobSpec("report", {"n": n}, queue="nightly") for n in range(count - 1)]
    specs.append(chronoq.JobSpec("report", {}, queue="nightly", key="r" if keyed else None))
    results = app.enqueue_many(specs)
    send = traces.one("send nightly")
    assert dict(send.attributes or {})["messaging.batch.message_count"] == count
    assert "messaging.message.id" not in (send.attributes or {})
    stored = app.store.job_list(JobListParams(limit=count + 1))
    assert {job.id for job in stored} == {result.id for result in results}
    trace_id, span_id = _ids(send)
    parents = {(job.trace_context or {})["traceparent"].rsplit("-", 1)[0] for job in stored}
    assert parents == {f"00-{trace_id:032x}-{span_id:016x}"}


@pytest.mark.postgres
def test_an_async_enqueue_in_the_callers_transaction_is_traced(pg_dsn: str, traces: Traces) -> None:
    async def enqueue_twice(app: chronoq.App) -> list[chronoq.Enqueued]:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            first = await app.enqueue_async("report", conn=conn, queue="q", key="k")
            again = await app.enqueue_async(
                "report", conn=conn, queue="q", key="k", unique_for="1h"
            )
            await conn.commit()
        return [first, again]

    with chronoq.App(pg_dsn) as app:
        instrument(app, tracer_provider=traces.provider)
        first, again = asyncio.run(enqueue_twice(app))
        assert again == chronoq.Enqueued(first.id, created=False)
        job = app.get_job(first.id)
    sends = traces.spans("send q")
    assert [dict(s.attributes or {})["chronoq.job.created"] for s in sends] == [True, False]
    assert job is not None and job.trace_context is not None
    assert job.trace_context["traceparent"].split("-")[2] == f"{_ids(sends[0])[1]:016x}"


def test_a_key_held_by_a_live_job_is_a_send_span_that_created_nothing(
    app: chronoq.App, traces: Traces
) -> None:
    first = app.enqueue("report", queue="q", key="k")
    again = app.enqueue("report", queue="q", key="k")
    assert again.id == first.id
    spans = traces.spans("send q")
    assert [dict(s.attributes or {})["chronoq.job.created"] for s in spans] == [True, False]
    # The job keeps the context of the enqueue that created it.
    job = app.get_job(first.id)
    assert job is not None and job.trace_context is not None
    assert job.trace_context["traceparent"].split("-")[2] == f"{_ids(spans[0])[1]:016x}"


def test_a_failed_insert_ends_its_span_in_error(
    sqlite_dsn: str, traces: Traces, tmp_path: Path
) -> None:
    # A caller's connection to a database without chronoq's tables: the insert fails inside
    # the span.
    conn = sqlite3.connect(tmp_path / "empty.db")
    with chronoq.App(sqlite_dsn) as app:
        instrument(app, tracer_provider=traces.provider)
        with pytest.raises(sqlite3.OperationalError):
            app.enqueue("report", queue="q", conn=conn)
    conn.close()
    send = traces.one("send q")
    assert send.status.status_code is StatusCode.ERROR
    assert [event.name for event in send.events] == ["exception"]


def test_uninstrument_stops_tracing(app: chronoq.App, traces: Traces) -> None:
    uninstrument(app)
    job = app.get_job(app.enqueue("report", queue="q").id)
    assert job is not None and job.trace_context is None
    assert traces.spans() == []


def test_an_unknown_propagation_is_refused(app: chronoq.App) -> None:
    with pytest.raises(ValueError, match="propagation must be 'link' or 'child'"):
        instrument(app, propagation="parent")


# -- across processes ---------------------------------------------------------------------------


def _worker_process(dsn: str, spans: Any) -> None:
    """A worker process of its own, with its own SDK and exporter: it runs every due job,
    then sends what it traced as plain data."""
    traces = Traces()
    with chronoq.App(dsn) as app:
        instrument(app, tracer_provider=traces.provider)
        _flaky_task(app, traces.provider)
        drain(app)
    spans.put(
        [
            {
                "name": span.name,
                "ids": _ids(span),
                "parent": span.parent.span_id if span.parent else None,
                "links": _linked(span),
                "attempt": dict(span.attributes or {}).get("chronoq.job.attempt"),
                "status": span.status.status_code.name,
                "events": [event.name for event in span.events],
            }
            for span in traces.spans()
        ]
    )


@pytest.mark.timeout(120)
def test_attempts_in_another_process_link_to_the_enqueue_across_retries(
    app: chronoq.App, traces: Traces, dsn: str
) -> None:
    _flaky_task(app, traces.provider)
    caller = traces.provider.get_tracer("caller")
    with caller.start_as_current_span("POST /signup"):
        app.enqueue("flaky", {"to": "a@example.com"})
    send = traces.one("send emails")

    spawn = multiprocessing.get_context("spawn")
    spans = spawn.Queue()
    worker = spawn.Process(target=_worker_process, args=(dsn, spans))
    worker.start()
    try:
        found = spans.get(timeout=DEADLINE)
    finally:
        worker.join(DEADLINE)
    assert worker.exitcode == 0
    attempts = sorted(
        (span for span in found if span["name"] == "process emails"), key=lambda s: s["attempt"]
    )
    assert [span["attempt"] for span in attempts] == [1, 2]
    assert all(span["links"] == [_ids(send)] for span in attempts)
    assert [span["status"] for span in attempts] == ["ERROR", "UNSET"]
    assert attempts[0]["events"] == ["exception"]
    [render] = [span for span in found if span["name"] == "render"]
    assert render["parent"] == attempts[1]["ids"][1]


# -- what it costs when off ----------------------------------------------------------------------


def test_without_instrument_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    script = f"""
import sys
import chronoq
from chronoq.testing import drain

app = chronoq.App("sqlite:///{tmp_path / "jobs.db"}")

@app.task
def ping() -> None: ...

ping.defer()
app.enqueue("ping", key="k", unique_for="1h")
assert drain(app).done == 2
app.close()
loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
assert not loaded, loaded
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=DEADLINE
    )
    assert result.returncode == 0, result.stderr


def test_without_the_extra_the_import_names_it(tmp_path: Path) -> None:
    script = """
import sys
sys.modules["opentelemetry"] = None
try:
    import chronoq.otel
except ImportError as exc:
    print(exc)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=DEADLINE
    )
    assert result.stdout == "chronoq.otel needs the otel extra: pip install 'chronoq[otel]'\n"
