"""PGQueuer on PostgreSQL, driven through asyncpg as its README shows.

Producers use `Queries.enqueue`, which takes lists for a bulk insert (one statement of unnested
arrays). Workers run `pgqueuer.run`, the programmatic form of `pgq run`, on uvloop as the CLI
does; it installs its own SIGINT/SIGTERM handlers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from importlib.metadata import version as package_version

import asyncpg
import pgqueuer
import uvloop
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from bench.systems.base import AsyncPeer, Recorder, Target, WorkerConfig
from bench.systems.sql import Q

ENTRYPOINT = "noop"
# Rows per `enqueue` call in the bulk path: one statement per chunk keeps the parameter arrays
# and the RETURNING set of a 100k enqueue from being held in memory all at once.
ENQUEUE_CHUNK = 10_000


class PgQueuerSystem(AsyncPeer):
    name = "pgqueuer"
    title = f"PGQueuer {package_version('pgqueuer')}"
    backend = "postgres"
    notes = (
        "asyncpg driver and `pgqueuer.run` on uvloop as `pgq run` does; `batch` is the dequeue "
        "`batch_size` (default 10) and `concurrency` is `max_concurrent_tasks`, which PGQueuer "
        "requires to be at least twice the batch. Durable (logged) tables, the install default."
    )

    best_layout = WorkerConfig(processes=2, concurrency=400, batch=200)
    herd_skip = (
        "no rate limit in 1.x: 1.0 removed the entrypoint's `requests_per_second` (its upgrade "
        "guide offers `concurrency_limit`, a cap on jobs running at once, instead)"
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._connection: asyncpg.Connection | None = None
        self._queries: Queries | None = None

    @classmethod
    def version(cls) -> str:
        return package_version("pgqueuer")

    @classmethod
    def drain_configs(cls, smoke: bool) -> list[WorkerConfig]:
        # Larger dequeue batches kept paying off up to about 200 on 2 cores.
        if smoke:
            return [cls._best()]
        return [WorkerConfig(processes=1, concurrency=400, batch=200), cls._best()]

    # -- parent side ---------------------------------------------------------------------

    def _get_queries(self) -> Queries:
        if self._queries is None:
            self._connection = self.run(asyncpg.connect(self.target.pg_dsn))
            self._queries = Queries(AsyncpgDriver(self._connection))
        return self._queries

    def install(self) -> None:
        self.run(self._get_queries().install())

    def enqueue_noop(self, count: int) -> None:
        self._enqueue_bulk(count, execute_after=None)

    def enqueue_future(self, count: int) -> None:
        self._enqueue_bulk(count, execute_after=timedelta(days=1))

    def _enqueue_bulk(self, count: int, execute_after: timedelta | None) -> None:
        queries = self._get_queries()

        async def enqueue() -> None:
            for start in range(0, count, ENQUEUE_CHUNK):
                size = min(ENQUEUE_CHUNK, count - start)
                await queries.enqueue(
                    [ENTRYPOINT] * size, [None] * size, [0] * size, [execute_after] * size
                )

        self.run(enqueue())

    def enqueue_due(self, due: Sequence[float]) -> None:
        queries = self._get_queries()
        now = time.time()
        payloads: list[bytes | None] = [json.dumps({"t": t}).encode() for t in due]
        # execute_after is relative to the database's NOW() at insert; negative means due now.
        delays: list[timedelta | None] = [timedelta(seconds=max(0.0, t - now)) for t in due]
        if len(due) == 1:
            self.run(queries.enqueue(ENTRYPOINT, payloads[0], execute_after=delays[0]))
        else:
            self.run(queries.enqueue([ENTRYPOINT] * len(due), payloads, [0] * len(due), delays))

    async def enqueue_one_async(self) -> None:
        await self._get_queries().enqueue(ENTRYPOINT, None)

    def unfinished(self, cap: int) -> int:
        # Hand-written SQL: `Queries.queue_size` groups every row by entrypoint, priority and
        # status (20-35 ms at 100k rows), far too heavy to poll every few milliseconds.
        queries = self._get_queries()
        if queries.qbe.settings.queue_table != "pgqueuer":
            raise RuntimeError("the harness's count expects PGQueuer's default table name")
        rows = self.run(queries.driver.fetch(Q["pgqueuer_unfinished"], cap))
        count = rows[0]["n"]
        assert isinstance(count, int)
        return count

    async def disconnect(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
            self._queries = None

    # -- worker process ------------------------------------------------------------------

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        logging.getLogger("pgqueuer").setLevel(logging.WARNING)
        uvloop.run(cls._serve(target, config, recorder, ready))

    @classmethod
    async def _serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        connection = await asyncpg.connect(target.pg_dsn)
        pgq = pgqueuer.PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            recorder.started(json.loads(job.payload)["t"] if job.payload else None)

        @asynccontextmanager
        async def factory() -> AsyncIterator[pgqueuer.PgQueuer]:
            yield pgq

        # Blocking the loop here is harmless: the worker has not started, and jobs enqueued
        # meanwhile are found by its first dequeue.
        ready()
        try:
            await pgqueuer.run(
                factory,
                batch_size=config.batch,
                max_concurrent_tasks=config.concurrency,
            )
        finally:
            await connection.close()


SYSTEM = PgQueuerSystem
