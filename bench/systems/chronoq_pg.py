"""chronoq on PostgreSQL through its public API: `App.enqueue_many` and `Worker`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from typing import ClassVar

import psycopg

from bench.systems.base import HerdStart, RateLimit, Recorder, System, Target, WorkerConfig
from bench.systems.sql import Q
from chronoq import App, JobSpec
from chronoq.worker.worker import Worker, WorkerOptions

BATCHES = (1, 10, 100)
PROCESSES = (1, 2, 4)
CONCURRENCY = 100
# PGQueuer's best layout on 2 cores (bench/PEERS.md), measured for chronoq and the bare loop too,
# so that the comparison is also made layout for layout.
PGQUEUER_BEST = WorkerConfig(2, 400, 200)
# The herd figure's queue, the only one with a rate limit, and its task.
HERD_QUEUE = "herd"
HERD_TASK = "herd"


def build_app(dsn: str, recorder: Recorder | None = None) -> App:
    app = App(dsn, pool_size=4)

    @app.task(max_attempts=3)
    async def noop(t: float | None = None) -> None:
        if recorder is not None:
            recorder.started(t)

    return app


def build_herd_app(dsn: str, limit: RateLimit | None = None) -> App:
    """An app of its own for the herd, so the other figures' workers serve one queue as before.
    The handler records nothing: the figure reads start times from the database."""
    app = App(dsn, pool_size=4)

    @app.task(name=HERD_TASK, queue=HERD_QUEUE, max_attempts=3)
    async def herd() -> None:
        pass

    if limit is not None:
        # Declared in the worker's app, as a deployment would: each worker stores it at start.
        app.limit(HERD_QUEUE, rate=f"{limit.rate:g}/s", burst=limit.burst)
    return app


class ChronoqPostgres(System):
    name: ClassVar[str] = "chronoq"
    title: ClassVar[str] = "chronoq (PostgreSQL)"
    backend: ClassVar[str] = "postgres"
    notes: ClassVar[str] = (
        "Async no-op handler, 100 jobs in flight per process, on uvloop (`--event-loop auto` "
        "takes it when installed); `batch` is the claim size."
    )
    # Two processes: the herd figure shows the limit holding across processes, not within one.
    herd_layout: ClassVar[WorkerConfig | None] = WorkerConfig(2, CONCURRENCY, 100)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self.app = build_app(self.dsn)
        self.app.migrate()
        self._watch: psycopg.Connection[tuple[object, ...]] | None = None
        self._herd_app: App | None = None

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
            self.app.enqueue("noop", {"t": due[0]}, run_at=_aware(due[0]))
            return
        self.app.enqueue_many(JobSpec("noop", {"t": t}, run_at=_aware(t)) for t in due)

    def enqueue_one(self) -> None:
        self.app.enqueue("noop")

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
        if self._herd_app is not None:
            self._herd_app.close()
        self.app.close()

    def herd_app(self) -> App:
        if self._herd_app is None:
            self._herd_app = build_herd_app(self.dsn)
        return self._herd_app

    def enqueue_herd(self, count: int, lead: float) -> int:
        row = self.watch_connection().execute(Q["chronoq_herd_due_at"], {"lead": lead}).fetchone()
        due = row[0] if row else None
        if not isinstance(due, datetime):
            raise RuntimeError(f"the database clock read {due!r}, not a timestamp")
        self.herd_app().enqueue_many(JobSpec(HERD_TASK, run_at=due) for _ in range(count))
        return _micros(due)

    def herd_unfinished(self, cap: int) -> int:
        args = {"cap": cap, "queue": HERD_QUEUE}
        row = self.watch_connection().execute(Q["chronoq_herd_unfinished"], args).fetchone()
        return int(str(row[0])) if row else 0

    def herd_starts(self) -> list[HerdStart]:
        rows = self.watch_connection().execute(Q["chronoq_herd_starts"], {"queue": HERD_QUEUE})
        return [
            HerdStart(int(str(due)), int(str(started)), str(worker))
            for due, started, worker in rows
        ]

    def herd_burst(self) -> float:
        burst = self.app.store.queue_get(HERD_QUEUE).burst
        if burst is None:
            raise RuntimeError(f"no rate limit is stored for queue {HERD_QUEUE!r}")
        return burst

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        app = build_app(cls.dsn_of(target), recorder)
        # The collector tuned at start, as `chronoq worker` runs its processes.
        options = WorkerOptions(
            concurrency=config.concurrency, batch_size=config.batch, tune_gc=True
        )
        worker = Worker(app, options)
        ready()
        worker.run()

    @classmethod
    def serve_herd(
        cls, target: Target, config: WorkerConfig, limit: RateLimit, ready: Callable[[], None]
    ) -> None:
        app = build_herd_app(cls.dsn_of(target), limit)
        options = WorkerOptions(
            queues=[HERD_QUEUE],
            concurrency=config.concurrency,
            batch_size=config.batch,
            tune_gc=True,
        )
        worker = Worker(app, options)
        ready()
        worker.run()  # stores the declared limit first, as every worker does at start


def _aware(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(instant: datetime) -> int:
    """Whole microseconds since the epoch, without a detour through a float."""
    return (instant - EPOCH) // timedelta(microseconds=1)


SYSTEM = ChronoqPostgres
