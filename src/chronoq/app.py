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

import asyncio
import collections
import functools
import inspect
import itertools
import logging
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Concatenate,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    Unpack,
    overload,
)

from chronoq.admin import Admin
from chronoq.config import Config
from chronoq.core.backoff import Backoff
from chronoq.core.enqueue import (
    MAX_ATTEMPTS_LIMIT,
    RENAMED_OPTIONS,
    Enqueued,
    EnqueueDefaults,
    JobSpec,
    TaskSettings,
    collector_paused,
    did_you_mean,
    prepare,
)
from chronoq.core.jobs import Job
from chronoq.core.misfire import RUN_LATE, Misfire, job_misfire
from chronoq.core.ratelimit import KeyLimit
from chronoq.core.schedules import ScheduleSpec
from chronoq.core.validate import (
    PRIORITY_RANGE,
    PayloadShape,
    check_int,
    check_name,
    check_positive_seconds,
    check_schedule_name,
)
from chronoq.deferrer import DEFER_OPTIONS, DeferOptions, Deferrer, configure, payload_of
from chronoq.errors import ConfigError, UnknownTask
from chronoq.fleet import FleetLookup
from chronoq.observability.events import JobsEnqueued, Observers
from chronoq.observability.tracing import EnqueueTracer
from chronoq.scheduling import SyncReport, key_limit, queue_limit_params, schedule_params
from chronoq.storage import JobStore, open_store
from chronoq.storage.base import JobInsertParams, QueueLimitParams
from chronoq.waiting import FinishWatcher, wait_for, wait_for_async

if TYPE_CHECKING:
    from chronoq.observability.metrics import Metrics
    from chronoq.worker.context import JobContext

log = logging.getLogger("chronoq.app")
P = ParamSpec("P")
R = TypeVar("R")


class Task(Generic[P, R]):
    """A registered handler. Calling it runs the function; `defer` enqueues a job for it, and
    `configure` sets the job's options.

    `P` is the handler's payload: its parameters after a first `ctx: JobContext`, if any, so
    type checkers hold `defer` to them. A direct call is checked for the payload, with or
    without a context.
    """

    def __init__(
        self,
        app: App,
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


class _TaskDecorator(Protocol):
    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


class _ScheduleDecorator(Protocol):
    """`App.schedule` as a decorator: it gives back the task, registering a function first."""

    @overload
    def __call__(self, target: Task[P, R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, target: Callable[Concatenate[JobContext, P], R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, target: Callable[P, R], /) -> Task[P, R]: ...


class App:
    """Tasks, configuration and a lazily opened store.

    `observers` get the events of this app's enqueues, and of every worker and scheduler
    running it (see `chronoq.observability.events`). `metrics` (a
    `chronoq.observability.metrics.Metrics`, None by default) is one: setting it subscribes it.
    `tracing` (None by default) wraps each enqueue's insert in a span: `chronoq.otel.instrument`
    sets it (see `chronoq.observability.tracing`).
    """

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
    ) -> _TaskDecorator: ...

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
        return list(dict.fromkeys(task.queue for task in self.tasks.values()))

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

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(
        self,
        task: str,
        payload: dict[str, Any] | None = None,
        *,
        run_at: datetime | None = None,
        delay: timedelta | float | str | None = None,
        queue: str | None = None,
        key: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        misfire: str | None = None,
        misfire_grace: timedelta | float | str | None = None,
        rate_key: str | None = None,
        unique_for: timedelta | float | str | None = None,
        conn: Any = None,
    ) -> Enqueued:
        """Enqueue one job. With `conn` (a psycopg or sqlite3 connection in an open
        transaction) the job exists if and only if that transaction commits.

        `misfire="skip"` with `misfire_grace` (a duration) ends the job `skipped` if a worker
        gets to it later than the grace. `rate_key` names the key whose limit it counts against
        (see `App.limit_keys`).

        `key` makes the job unique among live jobs: while a pending or running job holds the
        key, enqueuing it again returns that job (`created=False`). `unique_for` (a duration,
        with `key`) makes it unique for that period from the first job's enqueue, on the
        database clock: within it, enqueuing the key returns the first job even after it
        finished, and even after the pruner deleted it."""
        spec = JobSpec(
            task,
            payload,
            run_at=run_at,
            delay=delay,
            queue=queue,
            key=key,
            priority=priority,
            max_attempts=max_attempts,
            misfire=misfire,
            misfire_grace=misfire_grace,
            rate_key=rate_key,
            unique_for=unique_for,
        )
        return self._insert_many([self._preparer()(spec)], conn)[0]

    def enqueue_many(self, specs: Iterable[JobSpec], *, conn: Any = None) -> list[Enqueued]:
        """Enqueue many jobs in one transaction (COPY on PostgreSQL when no keys are set).
        One invalid job refuses the whole batch, and nothing is stored. Without `conn`,
        `specs` (any iterable, a generator too) is read as the jobs are sent, never held
        whole."""
        with collector_paused():
            to_params = self._preparer()
            if conn is None:
                # Jobs are taken from `specs`, and validated, as they are written: in a
                # transaction of the store's own, so a bad one still rolls back everything. A
                # caller's transaction is never put at risk that way; its jobs are all
                # validated before the first is sent.
                return self._insert_stream(map(to_params, specs))
            return self._insert_many([to_params(spec) for spec in specs], conn)

    def prepare(self, spec: JobSpec) -> JobInsertParams:
        """Check a job against this app's tasks and defaults, fill in what it leaves out and
        turn it into store parameters (`chronoq.core.enqueue.prepare`); raises before anything
        is stored."""
        return self._preparer()(spec)

    def enqueue_prepared(
        self, jobs: Sequence[JobInsertParams], *, conn: Any = None
    ) -> list[Enqueued]:
        """Store jobs that `prepare` returned, as `enqueue_many` would (for a producer that
        checks each job first to say which one is at fault, as the HTTP API does)."""
        with collector_paused():
            if conn is None:
                return self._insert_stream(iter(jobs))
            return self._insert_many(list(jobs), conn)

    async def enqueue_async(
        self,
        task: str,
        payload: dict[str, Any] | None = None,
        *,
        conn: Any = None,
        **options: Any,
    ) -> Enqueued:
        """`enqueue` for async code. An async psycopg connection joins its transaction."""
        spec = _spec_from_options(task, payload, options)
        return (await self.enqueue_many_async([spec], conn=conn))[0]

    async def enqueue_many_async(
        self, specs: Iterable[JobSpec], *, conn: Any = None
    ) -> list[Enqueued]:
        if conn is not None and _is_async_connection(conn):
            to_params = self._preparer()
            return await self._insert_async(conn, [to_params(spec) for spec in specs])
        return await asyncio.to_thread(lambda: self.enqueue_many(specs, conn=conn))

    def _enqueue_defaults(self, *, fleet: bool = False) -> EnqueueDefaults:
        config = self.config  # read at each enqueue: a command may give the app another DSN
        return EnqueueDefaults(
            config.default_queue, config.default_lease, config.payload_limit, fleet=fleet
        )

    def known_tasks(self) -> Mapping[str, TaskSettings]:
        """The tasks enqueue checks jobs against: this app's own, or with `fleet_tasks` and
        none of its own, those a live or recent process knows (read at most every 2 s)."""
        if self.tasks or not self.fleet_tasks:
            return self.tasks
        return self._fleet.tasks()

    def _preparer(self) -> Callable[[JobSpec], JobInsertParams]:
        """A job spec to the store's insert parameters, in one pass through `prepare`."""
        tasks = self.known_tasks()
        defaults = self._enqueue_defaults(fleet=self.fleet_tasks and not self.tasks)
        return lambda spec: prepare(spec, tasks, defaults, JobInsertParams)

    def _insert_stream(self, params: Iterator[JobInsertParams]) -> list[Enqueued]:
        """Insert jobs given without a connection, as one stream (COPY on PostgreSQL). A
        framework's App overrides this, as `_insert_joined`, to join its transaction."""
        if self.tracing is not None:
            # Every job is stamped with the span's context before the first is sent.
            jobs = list(params)
            return self._traced(jobs, lambda: self.store.job_insert_stream(jobs))
        if not self.observers.wants(JobsEnqueued):
            return self.store.job_insert_stream(params)
        runs: list[list[Any]] = []
        results = self.store.job_insert_stream(_tallied(params, runs))
        self._emit_enqueued(_unrolled(runs), results)
        return results

    def _insert_many(self, params: list[JobInsertParams], conn: Any) -> list[Enqueued]:
        if conn is None:
            return self._insert_joined(params)
        if self.tracing is not None:
            return self._traced(params, lambda: self.store.job_insert_many(params, conn=conn))
        return self._count_enqueued(params, self.store.job_insert_many(params, conn=conn))

    def _insert_joined(self, params: list[JobInsertParams]) -> list[Enqueued]:
        """Insert jobs given without a connection: on the store's own, in a transaction of
        their own. A framework's App overrides this to join the transaction its code is in
        (`chronoq.contrib.django`)."""
        return self._insert_traced(params, lambda: self.store.job_insert_many(params))

    def _insert_traced(
        self, params: list[JobInsertParams], insert: Callable[[], list[Enqueued]]
    ) -> list[Enqueued]:
        """Run `insert` of `params`, inside a producer span when the app is traced."""
        if self.tracing is not None:
            return self._traced(params, insert)
        return self._count_enqueued(params, insert())

    def _traced(
        self, params: list[JobInsertParams], insert: Callable[[], list[Enqueued]]
    ) -> list[Enqueued]:
        assert self.tracing is not None
        with self.tracing.sending(params) as sent:
            results = insert()
            sent(results)
        return self._count_enqueued(params, results)

    async def _insert_async(self, conn: Any, params: list[JobInsertParams]) -> list[Enqueued]:
        insert: Callable[..., Awaitable[list[Enqueued]]] | None = getattr(
            self.store, "job_insert_many_async", None
        )
        if insert is None:
            raise ConfigError("an async connection can only join a PostgreSQL store")
        if self.tracing is None:
            return self._count_enqueued(params, await insert(params, conn))
        with self.tracing.sending(params) as sent:
            results = await insert(params, conn)
            sent(results)
        return self._count_enqueued(params, results)

    def _count_enqueued(
        self, params: Sequence[JobInsertParams], results: list[Enqueued]
    ) -> list[Enqueued]:
        """Count the jobs created (not those whose key a live job held). In a caller's
        transaction they are counted when the insert returns, whether it commits or not."""
        if self.observers.wants(JobsEnqueued):
            self._emit_enqueued(((job.queue, job.task) for job in params), results)
        return results

    def _emit_enqueued(self, sent: Iterable[tuple[str, str]], results: list[Enqueued]) -> None:
        """One `JobsEnqueued` a queue and task: `sent` names each job's, in order."""
        created = collections.Counter(
            job for job, result in zip(sent, results, strict=True) if result.created
        )
        for (queue, task), count in created.items():
            self.observers.emit(JobsEnqueued(queue, task, count))

    # -- schedules and limits -------------------------------------------------------------

    @overload
    def schedule(
        self,
        cadence: str,
        task: str | Task[Any, Any],
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> ScheduleSpec: ...

    @overload
    def schedule(
        self,
        cadence: str,
        task: None = None,
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> _ScheduleDecorator: ...

    def schedule(
        self,
        cadence: str,
        task: str | Task[Any, Any] | None = None,
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> Any:
        """Declare a recurring schedule, stored when a scheduler starts (`App.sync`).

        `cadence` is a cron expression ("0 9 * * mon-fri") or an interval ("every 30s"),
        read in the IANA time zone `zone`. `misfire` says what happens to ticks the scheduler
        got to later than `misfire_grace`: "coalesce" (the default: one job for all of them,
        carrying their count), "run_late", "skip", or "catch_up" with `catch_up=N`. `jitter`
        spreads each tick's run over a window. Without `task`, it decorates a task or a function
        (registered as a task)::

            @app.schedule("0 9 * * *", zone="Europe/Paris")
            @app.task
            def digest() -> None: ...
        """

        def declare(target: str | Task[Any, Any] | Callable[..., Any]) -> Any:
            if not callable(target):
                target = check_name("task", target)  # refuses what is neither name nor function
            bound = target if isinstance(target, str | Task) else self.task(target)
            task_name = bound if isinstance(bound, str) else bound.name
            spec = self.schedule_spec(
                name=name or task_name,
                cadence=cadence,
                task=task_name,
                zone=zone,
                payload=payload,
                queue=queue,
                priority=priority,
                misfire=misfire,
                misfire_grace=misfire_grace,
                catch_up=catch_up,
                jitter=jitter,
            )
            if spec.name in self.schedules:
                raise ConfigError(f"schedule {spec.name!r} is declared twice")
            self.schedules[spec.name] = spec
            # As a decorator it gives back the task (a function is registered as one), so the
            # decorated name can still `defer` jobs; called with a task, the schedule.
            return bound if task is None else spec

        return declare(task) if task is not None else declare

    def schedule_spec(
        self,
        *,
        name: str,
        cadence: str,
        task: str,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> ScheduleSpec:
        """Validate a schedule against this app: its task, payload, queue and timing."""
        check_schedule_name(name)  # before the task: a name no URL can reach is the first fault
        job = self.prepare(JobSpec(task, payload, queue=queue, priority=priority))
        return ScheduleSpec.build(
            name=name,
            cadence=cadence,
            task=task,
            queue=job.queue,
            payload=payload,
            zone=zone,
            priority=job.priority,
            misfire=misfire,
            misfire_grace=misfire_grace,
            catch_up=catch_up,
            jitter=jitter,
            now=datetime.now(UTC),
        )

    def add_schedule(self, spec: ScheduleSpec, *, origin: str = "cli") -> bool:
        """Store a schedule now (the CLI's `schedule add`); True when it is new."""
        return self.store.schedule_upsert(schedule_params(spec, self.config.payload_limit, origin))

    def limit(
        self,
        queue: str,
        *,
        rate: str | None = None,
        burst: float | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Declare a queue's limits, applied by every worker and scheduler at start: `rate`
        ("200/s", "5000/m") across all workers, as a token bucket of `burst` jobs (default:
        50 ms worth), and at most `concurrency` of its jobs running at once."""
        self.limits[queue] = queue_limit_params(queue, rate, burst, concurrency)

    def limit_keys(
        self, queue: str, pattern: str, *, rate: str, burst: float | None = None
    ) -> None:
        """Declare a rate for each `rate_key` of `queue`'s jobs matching the glob `pattern`
        ("customer:*"), each key with a bucket of its own."""
        self.key_limits[(check_name("queue", queue), pattern)] = key_limit(pattern, rate, burst)

    def sync(self) -> SyncReport:
        """Store the declared limits and schedules (what `chronoq scheduler` does at start)."""
        self.sync_limits()
        return self.sync_schedules()

    def sync_limits(self) -> None:
        """Store the declared queue and key limits (every worker does this at start)."""
        for limits in self.limits.values():
            self.store.queue_limit(limits)
        for (queue, _), limit in self.key_limits.items():
            self.store.key_limit_set(queue, limit)

    def sync_schedules(self) -> SyncReport:
        """Store the declared schedules. Each keeps its cursor, counters and pause; stored
        schedules once declared in code but not by this app are reported, not removed
        (another deployment may still declare them)."""
        report = SyncReport()
        for spec in self.schedules.values():
            params = schedule_params(spec, self.config.payload_limit, "code")
            created = self.store.schedule_upsert(params)
            (report.created if created else report.updated).append(spec.name)
        report.undeclared = [
            schedule.name
            for schedule in self.store.schedule_list()
            if schedule.origin == "code" and schedule.name not in self.schedules
        ]
        for name in report.undeclared:
            log.warning(
                "schedule %s was declared in code but is not declared by this app; it keeps "
                "firing until `chronoq schedule remove %s`",
                name,
                name,
                extra={"action": "app.sync", "schedule": name},
            )
        return report

    def trigger_schedule(self, name: str) -> Enqueued:
        """Deprecated: `app.admin.trigger_schedule(name)`, where every admin operation is."""
        warnings.warn(
            "App.trigger_schedule is deprecated; use app.admin.trigger_schedule",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.admin.trigger_schedule(name)

    # -- reading --------------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        return self.store.job_get(job_id)

    # -- how a worker calls handlers --------------------------------------------------------

    # Does this app override call_handler(_async)? A plain app's async handlers are then awaited
    # directly, without the extra coroutine per job.
    wraps_handlers: ClassVar[bool] = False

    def call_handler(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call a sync handler, in the worker's handler thread. A framework's App overrides it
        to set up and clean up around each job (`chronoq.contrib.django` closes the thread's
        stale database connections)."""
        return fn(*args, **kwargs)

    async def call_handler_async(
        self, fn: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
    ) -> Any:
        """Await an async handler, on the worker's event loop (see `call_handler`)."""
        return await fn(*args, **kwargs)

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


def _spec_from_options(
    task: str, payload: dict[str, Any] | None, options: dict[str, Any]
) -> JobSpec:
    _refuse_renamed(options)
    unknown = set(options) - (DEFER_OPTIONS - {"conn"})
    if unknown:
        raise ConfigError(f"unknown enqueue option(s): {', '.join(sorted(unknown))}")
    return JobSpec(task, payload, **options)


def _refuse_renamed(options: dict[str, Any]) -> None:
    for old, new in RENAMED_OPTIONS.items():
        if old in options and new in options:
            raise ConfigError(
                f"`{old}` and `{new}` are both given: `{old}` is the old name of `{new}`; "
                f"give `{new}` alone"
            )
        if old in options:
            raise ConfigError(f"the option `{old}` is now called `{new}`")


def _tallied(params: Iterator[JobInsertParams], runs: list[list[Any]]) -> Iterator[JobInsertParams]:
    """Pass the parameters on as the store takes them, tallying their queues and tasks in runs
    of equal neighbours (`[queue, task, jobs]`): what the count of jobs created needs, without
    holding a long stream's jobs, and their payloads, until it ends."""
    run: list[Any] = [None, None, 0]
    for job in params:
        if job.task != run[1] or job.queue != run[0]:
            run = [job.queue, job.task, 0]
            runs.append(run)
        run[2] += 1
        yield job


def _unrolled(runs: list[list[Any]]) -> Iterator[tuple[str, str]]:
    """The queue and task of each job tallied by `_tallied`, in order."""
    for queue, task, jobs in runs:
        yield from itertools.repeat((queue, task), jobs)


def _is_async_connection(conn: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(conn, "execute", None))
