"""The producer API of the app: enqueue one job, many, from async code, or in a caller's own
transaction, with the checks of `chronoq.core.enqueue.prepare` and the `JobsEnqueued` events.

```
 enqueue / enqueue_many / defer ─► prepare (checks, defaults) ─► JobInsertParams
     ├─ no conn: _insert_stream (COPY on PostgreSQL)  or  _insert_joined (a framework's hook)
     ├─ a caller's conn: job_insert_many(conn=...)    (its transaction decides)
     └─ an async psycopg conn: job_insert_many_async
 each inside a producer span when traced (`tracing`), each counted into `JobsEnqueued`
```

`Producer` is a part of `chronoq.App`, which supplies its store, config, tasks and observers.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from chronoq.config import Config
from chronoq.core.enqueue import (
    RENAMED_OPTIONS,
    Enqueued,
    EnqueueDefaults,
    JobSpec,
    TaskSettings,
    collector_paused,
    prepare,
)
from chronoq.deferrer import DEFER_OPTIONS
from chronoq.errors import ConfigError
from chronoq.fleet.beacon import FleetLookup
from chronoq.observability.events import JobsEnqueued, Observers
from chronoq.observability.tracing import EnqueueTracer
from chronoq.storage.base import JobInsertParams

if TYPE_CHECKING:
    from chronoq.storage import JobStore
    from chronoq.task import Task


class Producer:
    """Enqueueing, as a part of `App`."""

    config: Config
    observers: Observers
    tracing: EnqueueTracer | None
    tasks: dict[str, Task[Any, Any]]
    fleet_tasks: bool
    _fleet: FleetLookup

    if TYPE_CHECKING:

        @property
        def store(self) -> JobStore: ...

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
