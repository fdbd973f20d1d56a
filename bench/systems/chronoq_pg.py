"""chronoq on PostgreSQL through its public API: `App.enqueue_many` and `Worker`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from typing import ClassVar

import psycopg

from bench.systems.base import Recorder, System, Target, WorkerConfig
from bench.systems.sql import Q
from chronoq import App, JobSpec
from chronoq.worker.worker import Worker, WorkerOptions

BATCHES = (1, 10, 100)
PROCESSES = (1, 2, 4)
CONCURRENCY = 100
# PGQueuer's best layout on 2 cores (bench/PEERS.md), measured for chronoq and the bare loop too,
# so that the comparison is also made layout for layout.
PGQUEUER_BEST = WorkerConfig(2, 400, 200)


def build_app(dsn: str, recorder: Recorder | None = None) -> App:
    app = App(dsn, pool_size=4)

    @app.task(max_attempts=3)
    async def noop(t: float | None = None) -> None:
        if recorder is not None:
            recorder.started(t)

    return app


class ChronoqPostgres(System):
    name: ClassVar[str] = "chronoq"
    title: ClassVar[str] = "chronoq (PostgreSQL)"
    backend: ClassVar[str] = "postgres"
    notes: ClassVar[str] = (
        "Async no-op handler, 100 jobs in flight per process; `batch` is the claim size."
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self.app = build_app(self.dsn)
        self.app.migrate()
        self._watch: psycopg.Connection[tuple[object, ...]] | None = None

    @property
    def dsn(self) -> str:
        return self.dsn_of(self.target)

    @classmethod
    def dsn_of(cls, target: Target) -> str:
        return target.pg_dsn

    @classmethod
    def version(cls) -> str:
        return version("chronoq")

    @classmethod
    def drain_configs(cls, smoke: bool) -> list[WorkerConfig]:
        if smoke:
            return [WorkerConfig(1, CONCURRENCY, 100), WorkerConfig(2, CONCURRENCY, 10)]
        grid = [WorkerConfig(p, CONCURRENCY, b) for p in PROCESSES for b in BATCHES]
        return [*grid, PGQUEUER_BEST]

    @classmethod
    def latency_config(cls) -> WorkerConfig:
        # Two processes: 10k jobs due within a second need throughput as much as a prompt
        # wake-up (one process cannot keep up; four share the two cores with the database).
        return WorkerConfig(2, CONCURRENCY, 100)

    def install(self) -> None:
        """The schema was migrated when the App opened the fresh database."""

    def enqueue_noop(self, count: int) -> None:
        self.app.enqueue_many(JobSpec("noop") for _ in range(count))

    def enqueue_due(self, due: Sequence[float]) -> None:
        if len(due) == 1:
            self.app.enqueue("noop", {"t": due[0]}, at=_aware(due[0]))
            return
        self.app.enqueue_many(JobSpec("noop", {"t": t}, at=_aware(t)) for t in due)

    def enqueue_future(self, count: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(Q["future_backlog"], {"count": count})

    def unfinished(self, cap: int) -> int:
        row = self.watch_connection().execute(Q["chronoq_unfinished"], {"cap": cap}).fetchone()
        return int(str(row[0])) if row else 0

    def watch_connection(self) -> psycopg.Connection[tuple[object, ...]]:
        if self._watch is None:
            self._watch = psycopg.connect(self.dsn, autocommit=True)
        return self._watch

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self.app.close()

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        app = build_app(cls.dsn_of(target), recorder)
        options = WorkerOptions(concurrency=config.concurrency, batch_size=config.batch)
        worker = Worker(app, options)
        ready()
        worker.run()


def _aware(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


SYSTEM = ChronoqPostgres
