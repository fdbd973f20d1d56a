"""Tasks: a registered handler, its settings, and how it is deferred.

```python
@app.task(queue="emails", max_attempts=8)           # App.task builds a Task
def send_email(ctx: chronoq.JobContext, to: str, subject: str) -> None: ...

send_email.defer(to="a@example.com", subject="hi")  # the payload, nothing else
send_email.configure(delay="4h").defer(to="b@example.com", subject="hi")   # a Deferrer
```

A task knows its owner only as a `TaskOwner`, the few enqueue methods it calls, so this module
does not import the app (which imports it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    Unpack,
    overload,
)

from chronoq.core.backoff import Backoff
from chronoq.core.enqueue import MAX_ATTEMPTS_LIMIT, Enqueued, JobSpec
from chronoq.core.misfire import RUN_LATE, Misfire
from chronoq.core.validate import (
    PRIORITY_RANGE,
    PayloadShape,
    check_int,
    check_name,
    check_positive_seconds,
)
from chronoq.deferrer import DeferOptions, Deferrer, configure, payload_of
from chronoq.errors import ConfigError

if TYPE_CHECKING:
    from chronoq.worker.context import JobContext

P = ParamSpec("P")
R = TypeVar("R")


class TaskOwner(Protocol):
    """What a task calls on the app that registered it."""

    def enqueue(self, task: str, payload: dict[str, Any] | None = None) -> Enqueued: ...

    async def enqueue_async(self, task: str, payload: dict[str, Any] | None = None) -> Enqueued: ...

    def enqueue_many(self, specs: Iterable[JobSpec], *, conn: Any = None) -> list[Enqueued]: ...

    async def enqueue_many_async(
        self, specs: Iterable[JobSpec], *, conn: Any = None
    ) -> list[Enqueued]: ...


class Task(Generic[P, R]):
    """A registered handler. Calling it runs the function; `defer` enqueues a job for it, and
    `configure` sets the job's options.

    `P` is the handler's payload: its parameters after a first `ctx: JobContext`, if any, so
    type checkers hold `defer` to them. A direct call is checked for the payload, with or
    without a context.
    """

    def __init__(
        self,
        app: TaskOwner,
        fn: Callable[..., R],
        *,
        name: str,
        queue: str,
        max_attempts: int,
        backoff: Backoff,
        lease: float,
        priority: int,
        misfire: Misfire = RUN_LATE,
        timeout: timedelta | float | None = None,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = check_name("task", name)
        self.queue = check_name("queue", queue)
        self.max_attempts = check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        if not isinstance(backoff, Backoff):
            raise ConfigError(f"backoff must be a chronoq.Backoff, got {backoff!r}")
        self.backoff = backoff
        self.lease = check_positive_seconds("lease", lease)
        self.priority = check_int("priority", priority, *PRIORITY_RANGE)
        self.misfire = misfire
        self.timeout = None if timeout is None else check_positive_seconds("timeout", timeout)
        self.is_async = inspect.iscoroutinefunction(fn)
        self.takes_context, self.payload_signature = _split_context(fn)
        self.payload_shape = PayloadShape.of(self.name, self.payload_signature)

    # A handler that takes a context is called with one, the others without: the types cannot
    # tell the two apart (`P` leaves the context out), so both calls are checked for the rest.
    @overload
    def __call__(self, /, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @overload
    def __call__(self, ctx: JobContext, /, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __call__(self, /, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)

    def defer(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """Enqueue a job whose payload is the handler's arguments (by keyword, or by position
        for parameters that take both). Every name is the payload's: options go through
        `configure`."""
        return self.app.enqueue(self.name, payload_of(self, args, kwargs))

    async def defer_async(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        return await self.app.enqueue_async(self.name, payload_of(self, args, kwargs))

    def configure(self, **options: Unpack[DeferOptions]) -> Deferrer[P]:
        """This task with enqueue options, each checked now: `delay` or `run_at`, `key`,
        `queue`, `priority`, `max_attempts`, `misfire`, `misfire_grace`, `rate_key`,
        `unique_for` and `conn`, as `App.enqueue` takes them. Its `defer` and `defer_async`
        take the payload::

            send_email.configure(delay="4h", key="welcome-42").defer(to="a@b.c", subject="hi")
        """
        return configure(self, options)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue}>"


class TaskDecorator(Protocol):
    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


class ScheduleDecorator(Protocol):
    """`App.schedule` as a decorator: it gives back the task, registering a function first."""

    @overload
    def __call__(self, target: Task[P, R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, target: Callable[Concatenate[JobContext, P], R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, target: Callable[P, R], /) -> Task[P, R]: ...


def _split_context(fn: Callable[..., Any]) -> tuple[bool, inspect.Signature]:
    """Does the handler take a JobContext first? Returns that and the payload's signature."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    takes_context = bool(params) and _is_context_param(params[0])
    if takes_context:
        params = params[1:]
    return takes_context, signature.replace(parameters=params)


def _is_context_param(param: inspect.Parameter) -> bool:
    if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
        return False
    annotation = param.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return param.name in ("ctx", "context") or str(text).endswith("JobContext")


def queues_of(tasks: Iterable[Task[Any, Any]]) -> list[str]:
    """The queues `tasks` use, in the order the tasks were registered."""
    return list(dict.fromkeys(task.queue for task in tasks))
