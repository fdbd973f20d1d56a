"""chronoq on its embedded default, a SQLite file, through the same public API."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from bench.systems.base import System, Target, WorkerConfig
from bench.systems.chronoq_pg import CONCURRENCY, ChronoqPostgres, build_app
from bench.systems.sql import Q
from chronoq.storage.sqlite.store import now_micros


class ChronoqSqlite(ChronoqPostgres):
    name: ClassVar[str] = "chronoq-sqlite"
    title: ClassVar[str] = "chronoq (SQLite)"
    backend: ClassVar[str] = "sqlite"
    notes: ClassVar[str] = (
        "The embedded default: one SQLite file in WAL mode shared by the worker processes."
    )

    max_drain_jobs = 50_000  # SQLite drains at a few thousand per second; half the count will do

    def __init__(self, target: Target) -> None:
        System.__init__(self, target)
        self.app = build_app(self.dsn)
        self.app.migrate()
        self._db: sqlite3.Connection | None = None

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
        if self._db is None:
            self._db = sqlite3.connect(self.target.sqlite_path)
        args = {"cap": cap, "now": now_micros()}
        row = self._db.execute(Q["chronoq_unfinished_sqlite"], args).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self.app.close()


SYSTEM = ChronoqSqlite
