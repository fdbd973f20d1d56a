"""The limit of chronoq's design: its exact claim and batch-finish statements in a plain loop.

No framework, no event loop, no threads: one connection per process, set up with the session
settings chronoq's store makes, claims `batch` jobs, "runs" them, and finishes them in one
statement, again and again, sending what chronoq's store sends (the claim's results in binary, a
batch of successes as `job_complete_many` with its two id arrays as text). Enqueue is a raw COPY
of the rows chronoq's bulk path writes (in binary, as it writes them), and one by one a prepared
single-row INSERT of the row `App.enqueue` writes on one autocommit connection. Whatever chronoq
loses against this is framework overhead.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from bench.systems.base import Recorder, Target, WorkerConfig
from bench.systems.chronoq_pg import BATCHES, PGQUEUER_BEST, PROCESSES, ChronoqPostgres
from bench.systems.sql import Q as BENCH_Q
from bench.systems.sql import copy_noop_jobs
from chronoq.storage.postgres.store import bigint_array_text
from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.postgres")
IDLE_PAUSE = 0.005
# The values `App.enqueue("noop")` writes for the bench's task (max_attempts 3, the default
# lease of 60 s); run_at is the database's clock_timestamp(), as chronoq's insert takes it.
SINGLE_ROW = {
    "queue": "default",
    "task": "noop",
    "payload": "{}",
    "priority": 0,
    "max_attempts": 3,
    "lease_seconds": 60.0,
}


class BareSQL(ChronoqPostgres):
    name: ClassVar[str] = "bare-sql"
    title: ClassVar[str] = "bare SQL loop (limit)"
    backend: ClassVar[str] = "postgres"
    notes: ClassVar[str] = (
        "chronoq's job_claim and job_complete_many statements in a psycopg loop, one connection "
        "per process, sent as chronoq's store sends them; enqueue is a raw COPY of the same rows, "
        "and one by one a prepared single-row INSERT on one autocommit connection."
    )
    measures_latency: ClassVar[bool] = False
    herd_layout: ClassVar[WorkerConfig | None] = None
    herd_skip: ClassVar[str] = (
        "the bare loop runs the open-queue claim statement; a limited queue's claim is "
        "chronoq's own transaction, measured as chronoq"
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._insert: psycopg.Connection[tuple[Any, ...]] | None = None

    @classmethod
    def version(cls) -> str:
        return f"psycopg {psycopg.__version__}"

    @classmethod
    def drain_configs(cls, smoke: bool) -> list[WorkerConfig]:
        if smoke:
            return [WorkerConfig(1, 100, 100)]
        return [*(WorkerConfig(p, b, b) for p in PROCESSES for b in BATCHES), PGQUEUER_BEST]

    def enqueue_noop(self, count: int) -> None:
        with psycopg.connect(self.dsn) as conn:
            copy_noop_jobs(conn, count)

    def enqueue_due(self, due: Sequence[float]) -> None:
        raise NotImplementedError("the bare loop has no wake-up path; it only drains")

    def enqueue_one(self) -> None:
        if self._insert is None:
            self._insert = psycopg.connect(self.dsn, autocommit=True)
        self._insert.execute(BENCH_Q["raw_insert"], SINGLE_ROW, prepare=True).fetchone()

    def close(self) -> None:
        if self._insert is not None:
            self._insert.close()
        super().close()

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        stop = False

        def on_term(signum: int, frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, on_term)
        with psycopg.connect(target.pg_dsn, autocommit=True, row_factory=dict_row) as conn:
            conn.execute(Q["session_setup"])
            ready()
            args = claim_args(config.batch)
            while not stop:
                rows = conn.execute(Q["job_claim"], args, prepare=True, binary=True).fetchall()
                # The claim always answers one row; a job row has an id, the wake-up alone not.
                rows = [row for row in rows if row["id"] is not None]
                if not rows:
                    time.sleep(IDLE_PAUSE)
                    continue
                for row in rows:
                    recorder.started(row["payload"].get("t"))
                conn.execute(Q["job_complete_many"], finish_args(rows), prepare=True).fetchall()


def claim_args(batch: int, worker_id: str = "bare") -> dict[str, Any]:
    """`job_claim`'s parameters for the bench's no-op jobs, as chronoq's worker sends them."""
    return {
        "queues": ["default"],
        "limit": batch,
        "worker_id": worker_id,
        "now": None,
        "leases": Jsonb({"noop": 60.0}),
        "max_attempts": Jsonb({"noop": 3}),
        "default_max_attempts": 20,
    }


def finish_args(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The store's finish of a batch of successes: ids and tokens (job_complete_many)."""
    return {
        "ids": bigint_array_text([row["id"] for row in rows]),
        "tokens": bigint_array_text([row["lease_token"] for row in rows]),
    }


SYSTEM = BareSQL
