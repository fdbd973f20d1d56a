"""The session's part of the store port: migrations, the database clock, change listeners.

Its statements are in each dialect's `session.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(slots=True)
class MigrationChange:
    """What a migration run did: migrations applied, and migrations undone (newest first)."""

    applied: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)


class ChangeListener(Protocol):
    """Wakes a worker when jobs may have become claimable."""

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds; True when something changed."""
        ...

    def notices(self, timeout: float) -> list[str]:
        """Block up to `timeout` seconds for changes; the payloads of every notification
        received by then (empty: none came). An adapter whose changes carry no payload
        answers one empty string a wake-up."""
        ...

    def close(self) -> None: ...


class SessionPort(Protocol):
    """What a store is as a connection to one database."""

    dsn_display: str

    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date)."""
        ...

    def migrate_to(self, version: str | None) -> MigrationChange:
        """Bring the schema to `version` (None: the newest), applying up migrations or the
        down migrations of newer ones; a version that is no known migration is refused."""
        ...

    def db_now(self) -> datetime: ...

    def open_listener(self) -> ChangeListener: ...

    def open_finish_listener(self) -> ChangeListener:
        """Wakes a waiter when jobs may have reached a final state (done, dead, cancelled,
        skipped): LISTEN on PostgreSQL, the database's change signal on SQLite. It may wake for
        other changes too; the waiter looks at its job again. Only the ends of jobs passed to
        `job_watch` are sure to wake it."""
        ...

    def close(self) -> None: ...
