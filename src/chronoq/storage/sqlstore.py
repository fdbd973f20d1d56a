"""What the two SQL stores share: every `JobStore` method whose logic is the same on both.

A method here runs named blocks of the dialect's `.sql` files (`DIALECT_FILES`) with its
arguments encoded by the dialect, and decodes the rows the same way. The stores subclass
`SqlStore` and supply only:

- `Q`, their statements by name;
- how a connection is had: `_read()`, `_write()` (statements each atomic on its own; SQLite takes
  its write lock for the whole block) and `_transaction()` (all of them or none);
- how values travel: `_clock()` (the `now` argument of a statement: SQLite's clock reading,
  nothing on PostgreSQL, which reads its own), `_pinned()`, `_time_arg()`, `_seconds_arg()`,
  `_array()`, and back: `_time()`, `_list()`, `_job()`, `_schedule()`;
- how a migration script runs (`_run_script()`) and is serialised (`_lock_migrations()`);
- the methods that really differ: the claims (SKIP LOCKED against SQLite's write lock), bulk
  inserts (COPY against executemany), finishing and heartbeats (arrays against JSON),
  LISTEN/NOTIFY against `data_version`, and leadership.

The shared methods are grouped by port, one part per table as the SQL is split
(`chronoq.storage.sql`: `JobsSql`, `JobAdminSql`, `QueuesSql`, `SchedulesSql`, `ProcessesSql`,
`TierSql`, all on the hooks of `SqlDialect`); `SqlStore` composes them and keeps migrations and
leadership. A new store method is a block in each dialect's file, the method in the part of its
table and, when the dialects differ in how a value is encoded, a hook above. Arguments a
dialect's statement does not name are ignored by both drivers, so a method passes `now` whether
or not PostgreSQL's SQL reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from chronoq.errors import ConfigError
from chronoq.storage.base import LeaderTerm, MigrationChange
from chronoq.storage.rows import leader_term
from chronoq.storage.sql.dialect import Connection, SqlDialect
from chronoq.storage.sql.jobadmin import JobAdminSql
from chronoq.storage.sql.jobs import BULK_THRESHOLD, JobsSql, goes_in_bulk, until_keyed
from chronoq.storage.sql.processes import ProcessesSql
from chronoq.storage.sql.queues import QueuesSql
from chronoq.storage.sql.schedules import SchedulesSql
from chronoq.storage.sql.tier import TierSql
from chronoq.storage.sqlfile import load_down_migrations, load_migrations

# Named here too: the stores and the tests import them from this module.
__all__ = [
    "BULK_THRESHOLD",
    "Connection",
    "SqlDialect",
    "SqlStore",
    "goes_in_bulk",
    "until_keyed",
]


class SqlStore(JobsSql, JobAdminSql, QueuesSql, SchedulesSql, ProcessesSql, TierSql):
    """The shared half of `SqliteStore` and `PostgresStore`."""

    # -- schema -----------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date)."""
        return self.migrate_to(None).applied

    def migrate_to(self, version: str | None) -> MigrationChange:
        """Bring the schema to `version` (a migration's name or number; None: the newest):
        apply the up migrations up to it, and the down migrations of every applied one after
        it, newest first, all in one transaction."""
        ups = load_migrations(self.MIGRATIONS)
        target = _target_index([name for name, _ in ups], version)
        change = MigrationChange()
        with self._transaction() as db:
            self._lock_migrations(db)
            db.execute(self.Q["migrations_table"])
            done = {row["name"] for row in db.execute(self.Q["migrations_applied"]).fetchall()}
            for name, script in ups[: target + 1]:
                if name not in done:
                    self._run_script(db, script)
                    db.execute(self.Q["migrations_record"], {"name": name, "now": self._clock()})
                    change.applied.append(name)
            downs = load_down_migrations(self.MIGRATIONS)
            for name, _ in reversed(ups[target + 1 :]):
                if name in done:
                    self._run_script(db, downs[name])
                    db.execute(self.Q["migrations_forget"], {"name": name})
                    change.reverted.append(name)
        return change

    # -- leadership -------------------------------------------------------------------------

    def leader_get(self, duty: str) -> LeaderTerm | None:
        with self._read() as db:
            row = db.execute(self.Q["leader_get"], {"duty": duty}).fetchone()
        return leader_term(row, self._time) if row else None

    def leader_list(self, duties: Sequence[str]) -> list[LeaderTerm]:
        """The unexpired terms among the records `duties` names (chronoq.coordination)."""
        args = {"duties": self._array(duties), "now": self._clock()}
        with self._read() as db:
            rows = db.execute(self.Q["leader_list"], args).fetchall()
        return [leader_term(row, self._time) for row in rows]


def _target_index(names: Sequence[str], version: str | None) -> int:
    """The position of the migration `version` names (its full name, or its number)."""
    if version is None:
        return len(names) - 1
    for index, name in enumerate(names):
        if version in (name, name.split("_", 1)[0]) or _same_number(version, name):
            return index
    raise ConfigError(
        f"unknown migration version {version!r}: known versions are {', '.join(names)}"
    )


def _same_number(version: str, name: str) -> bool:
    number = name.split("_", 1)[0]
    return version.isascii() and version.isdigit() and int(version) == int(number)
