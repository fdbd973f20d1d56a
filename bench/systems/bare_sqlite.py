"""The limit of chronoq's SQLite design: its exact claim and finish statements in a plain loop.

The same idea as `bare-sql` for the embedded store. One process opens the SQLite file with the
store's own session settings (WAL, synchronous=NORMAL) and runs, again and again, the
statements of one claim transaction (BEGIN IMMEDIATE, the next lease expiry, the queue's state,
skipping expired misfires, the claim, the next run after it, COMMIT), "runs" the jobs, and
finishes them in a transaction of their own, as the store does. No event loop, no threads, no
`Job` objects: whatever chronoq-sqlite loses against this is framework overhead. Enqueue is a
raw executemany of the rows chronoq's bulk path writes.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from bench.systems.base import Recorder, Target, WorkerConfig
from bench.systems.chronoq_sqlite import ChronoqSqlite
from bench.systems.sql import Q as BENCH_Q
from chronoq.storage.sqlfile import load_dialect
from chronoq.storage.sqlite.session import BUSY_TIMEOUT_MS, now_micros

Q = load_dialect("chronoq.storage.sqlite")
IDLE_PAUSE = 0.005
QUEUE = "default"


class BareSqlite(ChronoqSqlite):
    name: ClassVar[str] = "bare-sqlite"
    title: ClassVar[str] = "bare SQLite loop (limit)"
    backend: ClassVar[str] = "sqlite"
    notes: ClassVar[str] = (
        "chronoq's SQLite claim transaction and job_complete_many in a plain sqlite3 loop, one "
        "process on the same file with the store's pragmas; enqueue is a raw executemany of the "
        "same rows."
    )
    measures_latency: ClassVar[bool] = False
    herd_layout: ClassVar[WorkerConfig | None] = None
    herd_skip: ClassVar[str] = (
        "the bare loop runs the open-queue claim statements; a limited queue's claim is "
        "chronoq's own transaction, measured as chronoq-sqlite"
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._single: sqlite3.Connection | None = None

    @classmethod
    def version(cls) -> str:
        return f"SQLite {sqlite3.sqlite_version}"

    def enqueue_noop(self, count: int) -> None:
        now = now_micros()
        row = {"queue": QUEUE, "task": "noop", "payload": "{}", "priority": 0, "run_at": now}
        row |= {"max_attempts": 3, "lease_seconds": 60.0, "now": now}
        with self.db() as db:  # one transaction
            db.executemany(BENCH_Q["raw_insert_sqlite"], (row for _ in range(count)))

    def enqueue_due(self, due: Sequence[float]) -> None:
        raise NotImplementedError("the bare loop has no wake-up path; it only drains")

    def enqueue_one(self) -> None:
        """The plain single-row INSERT of the row chronoq writes, committed on its own (an
        autocommit connection with the store's pragmas): the SQLite limit of one-by-one enqueue
        (not chronoq's `App.enqueue`, which it inherits)."""
        if self._single is None:
            self._single = connect(self.target.sqlite_path)
        now = now_micros()
        row = {"queue": QUEUE, "task": "noop", "payload": "{}", "priority": 0, "run_at": now}
        row |= {"max_attempts": 3, "lease_seconds": 60.0, "now": now}
        self._single.execute(BENCH_Q["raw_insert_sqlite"], row)

    def close(self) -> None:
        if self._single is not None:
            self._single.close()
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
        db = connect(target.sqlite_path)
        try:
            ready()
            settings = _claim_settings()
            while not stop:
                rows = claim(db, settings, config.batch)
                if not rows:
                    time.sleep(IDLE_PAUSE)
                    continue
                for row in rows:
                    recorder.started(json.loads(row["payload"]).get("t"))
                finish(db, rows)
        finally:
            db.close()


def connect(path: str) -> sqlite3.Connection:
    """A connection set up as the store sets up its own."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute(Q["journal_mode_wal"])
    db.execute(Q["synchronous_normal"])
    return db


def claim(db: sqlite3.Connection, settings: dict[str, Any], limit: int) -> list[sqlite3.Row]:
    """The store's claim transaction for one open queue, statement for statement."""
    db.execute(Q["begin_write"])
    try:
        now = now_micros()
        db.execute(Q["job_next_lease_expiry"]).fetchone()
        db.execute(Q["queue_requested"], {"queues": settings["queues"]}).fetchall()
        args = settings | {"queue": QUEUE, "limit": limit, "now": now}
        db.execute(Q["job_skip_expired"], args)
        rows = db.execute(Q["job_claim_queue"], args).fetchall()
        db.execute(Q["job_next_run_after"], {"queues": settings["queues"], "now": now}).fetchone()
    except BaseException:
        db.execute(Q["rollback"])
        raise
    db.execute(Q["commit"])
    return rows


def finish(db: sqlite3.Connection, rows: list[sqlite3.Row]) -> None:
    """The store's finish of a batch of successes, in a write transaction of its own."""
    refs = json.dumps([[row["id"], row["lease_token"]] for row in rows])
    db.execute(Q["begin_write"])
    try:
        db.execute(Q["job_complete_many"], {"refs": refs, "now": now_micros()}).fetchall()
    except BaseException:
        db.execute(Q["rollback"])
        raise
    db.execute(Q["commit"])


def _claim_settings() -> dict[str, Any]:
    return {
        "queues": json.dumps([QUEUE]),
        "worker_id": "bare",
        "leases": json.dumps({"noop": 60.0}),
        "max_attempts": json.dumps({"noop": 3}),
        "default_max_attempts": 20,
    }


SYSTEM = BareSqlite
