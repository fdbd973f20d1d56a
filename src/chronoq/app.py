"""The App: a registry of tasks, the enqueue API, and the store they share.

```python
app = chronoq.App()                                   # CHRONOQ_DSN or sqlite:///chronoq.db

@app.task(queue="emails", max_attempts=8, backoff=chronoq.Backoff(base=2, cap=3600), lease=60)
def send_email(ctx: chronoq.JobContext, to: str, subject: str) -> None: ...

send_email.defer(to="a@example.com", subject="hi")
send_email.configure(delay=timedelta(hours=4), key="b").defer(to="b@example.com", subject="hi")
app.enqueue("send_email", {"to": "a@example.com", "subject": "hi"}, key="welcome-42")
```

The store is opened on first use, so importing a module that builds an App touches no database.
Sync and async callers share one implementation: the async API hands the same work to a thread
(`asyncio.to_thread`), except when the caller passes its own async connection.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Concatenate,
    ParamSpec,
    TypeVar,
    overload,
)

from chronoq.admin import Admin
from chronoq.config import Config
from chronoq.core.backoff import Backoff
from chronoq.core.enqueue import Enqueued, did_you_mean
from chronoq.core.jobs import Job
from chronoq.core.misfire import job_misfire
from chronoq.core.ratelimit import KeyLimit
from chronoq.core.schedules import ScheduleSpec
from chronoq.errors import ConfigError, UnknownTask
from chronoq.fleet.beacon import FleetLookup
from chronoq.observability.events import Observers
from chronoq.observability.tracing import EnqueueTracer
from chronoq.producer import Producer
from chronoq.runtime import Runtime
from chronoq.scheduling import Declarations
from chronoq.storage import JobStore, open_store
from chronoq.storage.base import QueueLimitParams
from chronoq.task import Task as Task  # chronoq.app.Task, as it was before tasks had a module
from chronoq.task import TaskDecorator, queues_of
from chronoq.waiting import FinishWatcher, wait_for, wait_for_async
from chronoq.worker.middleware import AppHooks, HandlerMiddleware, chain, chain_async

if TYPE_CHECKING:
    from chronoq.observability.metrics import Metrics
    from chronoq.worker.context import JobContext

log = logging.getLogger("chronoq.app")
P = ParamSpec("P")
R = TypeVar("R")


class App(Producer, Declarations):
    """Tasks, configuration and a lazily opened store.

    `observers` get the events of this app's enqueues, and of every worker and scheduler
    running it (see `chronoq.observability.events`). `metrics` (a
    `chronoq.observability.metrics.Metrics`, None by default) is one: setting it subscribes it.
    `tracing` (None by default) wraps each enqueue's insert in a span: `chronoq.otel.instrument`
    sets it (see `chronoq.observability.tracing`). `middleware` (empty by default) runs around
    every handler a worker of this app calls, outermost first
    (`chronoq.worker.middleware.HandlerMiddleware`; Django's app brings one).
    """

    middleware: Sequence[HandlerMiddleware] = ()

    def __init__(
        self,
        dsn: str | None = None,
        *,
        config: Config | None = None,
        fleet_tasks: bool = False,
        **settings: Any,
    ):
        # The dsn joins the other settings before they are validated: rules across fields
        # (tiered dispatch needs PostgreSQL) must see the store this app will use.
        base = config or Config.load(dsn=dsn, **settings)
        self.config = base.with_dsn(dsn)
        self.observers = Observers()
        self._metrics: Metrics | None = None
        self.tracing: EnqueueTracer | None = None
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, ScheduleSpec] = {}
        self.limits: dict[str, QueueLimitParams] = {}
        self.key_limits: dict[tuple[str, str], KeyLimit] = {}
        self._store: JobStore | None = None
        self._store_lock = threading.Lock()
        # Without handlers of its own, an app with `fleet_tasks` learns each task's queue and
        # settings from the fleet registry (what `chronoq enqueue` and `chronoq serve` do
        # without --app).
        self.fleet_tasks = fleet_tasks
        self._fleet = FleetLookup(lambda: self.store, max_age=2.0)
        # Wakes `wait` and `wait_async` when jobs end (one listener for all of them).
        self._watcher = FinishWatcher(lambda: self.store)

    @property
    def metrics(self) -> Metrics | None:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: Metrics | None) -> None:
        if self._metrics is not None:
            self.observers.unsubscribe(self._metrics)
        if metrics is not None:
            self.observers.subscribe(metrics)
        self._metrics = metrics

    # -- tasks ----------------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[Concatenate[JobContext, P], R], /) -> Task[P, R]: ...

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        lease: float | None = None,
        priority: int = 0,
        misfire: str = "run_late",
        misfire_grace: timedelta | float | str | None = None,
        timeout: timedelta | float | None = None,
    ) -> TaskDecorator: ...

    def task(  # type: ignore[misc]  # mypy misreads the optional positional-only `fn`
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        lease: float | None = None,
        priority: int = 0,
        misfire: str = "run_late",
        misfire_grace: timedelta | float | str | None = None,
        timeout: timedelta | float | None = None,
    ) -> Any:
        """Register a handler, as `@app.task` or `@app.task(queue=..., ...)`.

        `misfire="skip"` with a `misfire_grace` makes its jobs end `skipped` when a worker gets
        to them later than the grace; the default, "run_late", runs them however late.

        `timeout` (seconds or a timedelta) fails an attempt that runs longer. An async handler
        is cancelled. A sync one cannot be stopped inside its thread, so the worker process
        finishes its other jobs and exits for a fresh one to take its place (see
        docs/reliability.md); without a timeout, a handler may run as long as it likes."""
        rule = job_misfire(misfire, misfire_grace)

        def register(func: Callable[..., Any]) -> Task[Any, Any]:
            task: Task[Any, Any] = Task(
                self,
                func,
                # `is None`, not `or`: an empty name or a zero is a mistake to report, not a
                # request for the default.
                name=func.__name__ if name is None else name,
                queue=self.config.default_queue if queue is None else queue,
                max_attempts=(
                    self.config.default_max_attempts if max_attempts is None else max_attempts
                ),
                backoff=Backoff() if backoff is None else backoff,
                lease=self.config.default_lease if lease is None else lease,
                priority=priority,
                misfire=rule,
                timeout=timeout,
            )
            if task.name in self.tasks:
                raise ConfigError(f"task {task.name!r} is registered twice")
            self.tasks[task.name] = task
            return task

        return register(fn) if fn is not None else register

    @property
    def queues(self) -> list[str]:
        """The queues the registered tasks use, in registration order."""
        return queues_of(self.tasks.values())

    def get_task(self, name: str) -> Task[Any, Any]:
        task = self.tasks.get(name)
        if task is None:
            raise UnknownTask(f"unknown task {name!r}{did_you_mean(name, self.tasks)}")
        return task

    # -- store ----------------------------------------------------------------------------

    @property
    def store(self) -> JobStore:
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    self._store = open_store(self.config)
        return self._store

    @functools.cached_property
    def admin(self) -> Admin:
        """Cancel, requeue, purge, pause, resume, remove and trigger, with their checks: the
        one admin API every front end (HTTP, dashboard, CLI) goes through (`chronoq.admin`)."""
        return Admin(self)

    def trigger_schedule(self, name: str) -> Enqueued:
        """Deprecated: `app.admin.trigger_schedule(name)`, where every admin operation is."""
        warnings.warn(
            "App.trigger_schedule is deprecated; use app.admin.trigger_schedule",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.admin.trigger_schedule(name)

    def migrate(self) -> list[str]:
        return self.store.migrate()

    def close(self) -> None:
        self._watcher.close()
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        return self.store.job_get(job_id)

    # -- how a worker calls handlers --------------------------------------------------------

    # Deprecated: an App subclass that overrides call_handler(_async) set this; list a
    # HandlerMiddleware in `middleware` instead.
    wraps_handlers: ClassVar[bool] = False

    def runtime(self) -> Runtime:
        """This app as its workers, schedulers and services see it (`chronoq.runtime`)."""
        return Runtime(
            tasks=MappingProxyType(self.tasks),
            observers=self.observers,
            middleware=self.handler_middleware(),
            limits=MappingProxyType(self.limits),
            key_limits=MappingProxyType(self.key_limits),
            open_store=lambda: self.store,
            read_config=lambda: self.config,
            sync=self.sync,
            sync_limits=self.sync_limits,
        )

    def handler_middleware(self) -> tuple[HandlerMiddleware, ...]:
        """What a worker calls its handlers through: `middleware`, or, for a subclass that
        still overrides `call_handler`/`call_handler_async`, those methods (`AppHooks`, which
        the worker warns about)."""
        cls = type(self)
        overridden = cls.call_handler is not App.call_handler or (
            cls.wraps_handlers and cls.call_handler_async is not App.call_handler_async
        )
        return (AppHooks(self),) if overridden else tuple(self.middleware)

    def call_handler(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call a sync handler through this app's `middleware`, as a worker does."""
        return chain(self.middleware)(fn, *args, **kwargs)

    async def call_handler_async(
        self, fn: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
    ) -> Any:
        """Await an async handler through this app's `middleware`, as a worker does."""
        run = chain_async(self.middleware)
        return await (fn(*args, **kwargs) if run is None else run(fn, *args, **kwargs))

    def wait(self, job_id: int, *, timeout: float | None = None) -> Any:
        """Block until job `job_id` ends and return its output (what its handler returned,
        None if nothing). A job that ended otherwise raises `JobFailed` (dead), `JobWasCancelled`
        or `JobSkipped`, each carrying the job and its last error; `WaitTimeout` when it has not
        ended within `timeout` seconds (None: wait as long as it takes); `JobNotFound` for an
        id no job has. Woken by the store's notification of finished jobs, never by polling."""
        return wait_for(self.store, self._watcher, job_id, timeout)

    async def wait_async(self, job_id: int, *, timeout: float | None = None) -> Any:
        """`wait` for async code: the event loop is never blocked."""
        return await wait_for_async(self.store, self._watcher, job_id, timeout)
