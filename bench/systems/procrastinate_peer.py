"""Procrastinate on PostgreSQL with its psycopg 3 connector.

Producers defer through `App.configure_task(...)`: `batch_defer_async` inserts many jobs in one
statement. Workers run `App.run_worker_async`, which stops gracefully on SIGINT/SIGTERM through
its own signal handlers. Procrastinate fetches one job per query, so `batch` is always 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import version as package_version

from procrastinate import App, PsycopgConnector
from procrastinate.jobs import JobDeferrer

from bench.systems.base import AsyncPeer, Recorder, Target, WorkerConfig
from bench.systems.sql import Q

TASK = "noop"
# Jobs per `batch_defer_async` call: one statement per chunk bounds the memory a 100k enqueue
# holds in Python objects and in the query's array parameter.
DEFER_CHUNK = 10_000
# The worker polls for jobs whose `schedule_at` has come this often (seconds). NOTIFY only fires
# on insert, so for scheduled jobs this is the pickup mechanism; the default of 5 s would make
# the lateness figure a measure of that default rather than of the queue.
POLLING_INTERVAL = 0.1


def _connector(dsn: str, pool_size: int) -> PsycopgConnector:
    # Extra arguments go to psycopg_pool.AsyncConnectionPool.
    return PsycopgConnector(conninfo=dsn, min_size=pool_size, max_size=pool_size)


class ProcrastinateSystem(AsyncPeer):
    name = "procrastinate"
    title = f"Procrastinate {package_version('procrastinate')}"
    backend = "postgres"
    notes = (
        "psycopg 3 connector; `concurrency` is the worker's `concurrency` (jobs run at once; "
        "fetches are one job per query, no batch knob), with the connection pool sized to "
        "match. `fetch_job_polling_interval` 0.1 s so scheduled jobs are found promptly; "
        "finished jobs are kept (`delete_jobs` default)."
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._app: App | None = None

    # Its drain rate is steady well before this many jobs; the full count would take minutes.
    max_drain_jobs = 10_000
    best_layout = WorkerConfig(processes=2, concurrency=10, batch=1)
    herd_skip = (
        "no rate limit: a task's `lock` runs its jobs one at a time, which bounds concurrency, "
        "not starts per second"
    )

    @classmethod
    def version(cls) -> str:
        return package_version("procrastinate")

    # -- parent side ---------------------------------------------------------------------

    def _get_app(self) -> App:
        if self._app is None:
            app = App(connector=_connector(self.target.pg_dsn, pool_size=2))

            # Registered so the one-by-one figure defers as an application does, `task.defer`;
            # the parent never runs it.
            @app.task(name=TASK)
            async def noop(t: float | None = None) -> None:
                pass

            self.run(app.open_async())
            self._app = app
        return self._app

    def install(self) -> None:
        self.run(self._get_app().schema_manager.apply_schema_async())

    def enqueue_noop(self, count: int) -> None:
        self._defer_bulk(self._get_app().configure_task(TASK), count)

    def enqueue_future(self, count: int) -> None:
        self._defer_bulk(self._get_app().configure_task(TASK, schedule_in={"days": 1}), count)

    def _defer_bulk(self, deferrer: JobDeferrer, count: int) -> None:
        async def defer() -> None:
            for start in range(0, count, DEFER_CHUNK):
                size = min(DEFER_CHUNK, count - start)
                await deferrer.batch_defer_async(*({} for _ in range(size)))

        self.run(defer())

    def enqueue_due(self, due: Sequence[float]) -> None:
        app = self._get_app()
        if len(due) == 1:
            at = datetime.fromtimestamp(due[0], UTC)
            self.run(app.configure_task(TASK, schedule_at=at).defer_async(t=due[0]))
            return
        # Each job has its own schedule_at, which a single deferrer cannot express; the job
        # manager's batch defer takes fully configured jobs in one statement.
        jobs = [
            app.configure_task(TASK, schedule_at=datetime.fromtimestamp(t, UTC)).make_new_job(t=t)
            for t in due
        ]
        self.run(app.job_manager.batch_defer_jobs_async(jobs))

    async def enqueue_one_async(self) -> None:
        await self._get_app().tasks[TASK].defer_async()

    def unfinished(self, cap: int) -> int:
        # Hand-written SQL: `JobManager.list_queues_async` aggregates every row, finished ones
        # included (~100 ms at 100k rows), far too heavy to poll every few milliseconds. This
        # reads a partial index on todo/doing jobs and stops at `cap`.
        row = self.run(
            self._get_app().connector.execute_query_one_async(
                Q["procrastinate_unfinished"], cap=cap
            )
        )
        return int(row["n"])

    async def disconnect(self) -> None:
        if self._app is not None:
            await self._app.close_async()
            self._app = None

    # -- worker process ------------------------------------------------------------------

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
        asyncio.run(cls._serve(target, config, recorder, ready))

    @classmethod
    async def _serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        # One connection per running job to finish it, one for fetching, one for LISTEN.
        app = App(connector=_connector(target.pg_dsn, pool_size=config.concurrency + 2))

        @app.task(name=TASK)
        async def noop(t: float | None = None) -> None:
            recorder.started(t)

        async with app.open_async():
            ready()
            await app.run_worker_async(
                concurrency=config.concurrency,
                fetch_job_polling_interval=POLLING_INTERVAL,
            )


SYSTEM = ProcrastinateSystem
