"""chronoq on its embedded default, a SQLite file, through the same public API."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import ClassVar

from bench.herd import SECOND_US
from bench.systems.base import HerdStart, System, Target, WorkerConfig
from bench.systems.chronoq_pg import (
    CONCURRENCY,
    HERD_QUEUE,
    HERD_TASK,
    ChronoqPostgres,
    build_app,
)
from bench.systems.sql import Q
from chronoq import JobSpec
from chronoq.storage.sqlite.session import now_micros


class ChronoqSqlite(ChronoqPostgres):
    name: ClassVar[str] = "chronoq-sqlite"
    title: ClassVar[str] = "chronoq (SQLite)"
    backend: ClassVar[str] = "sqlite"
    notes: ClassVar[str] = (
        "The embedded default: one SQLite file in WAL mode shared by the worker processes."
    )

    max_drain_jobs = 50_000  # SQLite drains at a few thousand per second; half the count will do
    # One process, as in its other figures: SQLite has one writer at a time.
    herd_layout: ClassVar[WorkerConfig | None] = WorkerConfig(1, CONCURRENCY, 100)

    def __init__(self, target: Target) -> None:
        System.__init__(self, target)
        self.app = build_app(self.dsn)
        self.app.migrate()
        self._db: sqlite3.Connection | None = None
        self._herd_app = None

    @classmethod
    def dsn_of(cls, target: Target) -> str:
        return f"sqlite:///{target.sqlite_path}"

    @classmethod
    def drain_configs(cls, smoke: bool) -> list[WorkerConfig]:
        # One process: SQLite has one writer at a time, and a second process drained slower.
        return [WorkerConfig(1, CONCURRENCY, 100)]

    @classmethod
    def latency_config(cls) -> WorkerConfig:
        return WorkerConfig(1, CONCURRENCY, 100)

    def unfinished(self, cap: int) -> int:
        args = {"cap": cap, "now": now_micros()}
        row = self.db().execute(Q["chronoq_unfinished_sqlite"], args).fetchone()
        return int(row[0]) if row else 0

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = sqlite3.connect(self.target.sqlite_path)
        return self._db

    def enqueue_herd(self, count: int, lead: float) -> int:
        # chronoq's SQLite store stamps instants with this machine's clock: that is its
        # database clock. The first whole second at least `lead` ahead, as on PostgreSQL.
        due_us = (now_micros() + round(lead * SECOND_US)) // SECOND_US * SECOND_US + SECOND_US
        due = datetime.fromtimestamp(due_us // SECOND_US, UTC)
        self.herd_app().enqueue_many(JobSpec(HERD_TASK, run_at=due) for _ in range(count))
        return due_us

    def herd_unfinished(self, cap: int) -> int:
        args = {"cap": cap, "queue": HERD_QUEUE}
        row = self.db().execute(Q["chronoq_herd_unfinished_sqlite"], args).fetchone()
        return int(row[0]) if row else 0

    def herd_starts(self) -> list[HerdStart]:
        rows = self.db().execute(Q["chronoq_herd_starts_sqlite"], {"queue": HERD_QUEUE})
        return [HerdStart(int(due), int(started), str(worker)) for due, started, worker in rows]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        if self._herd_app is not None:
            self._herd_app.close()
        self.app.close()


SYSTEM = ChronoqSqlite
