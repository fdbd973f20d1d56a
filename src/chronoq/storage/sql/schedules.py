"""The shared SQL of the schedules' port (`SchedulesPort`); the upsert differs per dialect (how
each tells a created row) and stays in each store.
"""

from __future__ import annotations

from datetime import timedelta

from chronoq.core.schedules import Schedule
from chronoq.storage.base import ScheduleAdvance, ScheduleDecision, ScheduleDue
from chronoq.storage.rows import record_args, tick_args
from chronoq.storage.sql.dialect import SqlDialect


class SchedulesSql(SqlDialect):
    """Schedules and their advance, tick by tick."""

    def schedule_get(self, name: str) -> Schedule | None:
        with self._read() as db:
            row = db.execute(self.Q["schedule_get"], {"name": name}).fetchone()
        return self._schedule(row) if row else None

    def schedule_list(self) -> list[Schedule]:
        with self._read() as db:
            return [self._schedule(row) for row in db.execute(self.Q["schedule_list"])]

    def schedule_pause(self, name: str, paused: bool) -> Schedule | None:
        """Pause: its tick jobs not yet due are cancelled. Resume: the cursor moves to now,
        so ticks that fell in the pause are not treated as missed."""
        with self._transaction() as db:
            now = self._clock()
            args = {"name": name, "paused": paused, "now": now}
            row = db.execute(self.Q["schedule_pause"], args).fetchone()
            if row is not None and paused:
                ahead = {"name": name, "all": False, "now": now}
                db.execute(self.Q["schedule_cancel_ahead"], ahead)
        return self._schedule(row) if row else None

    def schedule_remove(self, name: str) -> bool:
        """Delete the schedule and cancel its pending tick jobs."""
        with self._transaction() as db:
            removed = db.execute(self.Q["schedule_remove"], {"name": name}).fetchone() is not None
            if removed:
                ahead = {"name": name, "all": True, "now": self._clock()}
                db.execute(self.Q["schedule_cancel_ahead"], ahead)
        return removed

    def schedule_due(self, lookahead: timedelta) -> ScheduleDue:
        args = {"lookahead": self._seconds_arg(lookahead.total_seconds()), "now": self._clock()}
        with self._read() as db:
            row = db.execute(self.Q["schedule_due"], args).fetchone()
        db_now = self._time(row["db_now"])
        assert db_now is not None
        return ScheduleDue(self._list(row["names"]), self._time(row["next_tick"]), db_now)

    def schedule_advance(self, name: str, decide: ScheduleDecision) -> ScheduleAdvance | None:
        """Lock the schedule, let `decide` plan the pass on the database clock, then insert its
        jobs and store its cursor and counters, all in one transaction. None: the schedule is
        gone or paused, or `decide` had nothing to do."""
        with self._transaction() as db:
            now = self._clock()
            row = db.execute(self.Q["schedule_lock"], {"name": name, "now": now}).fetchone()
            if row is None:
                return None
            db_now = self._time(row["db_now"])
            assert db_now is not None
            advance = decide(self._schedule(row), db_now)
            if advance is None:
                return None
            for job in advance.jobs:
                args = tick_args(job, self._time_arg) | {"now": now}
                advance.inserted += (
                    db.execute(self.Q["job_insert_tick"], args).fetchone() is not None
                )
            record = record_args(name, advance, self._time_arg) | {"now": now}
            db.execute(self.Q["schedule_record"], record)
        return advance
