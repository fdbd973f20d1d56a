"""The shared SQL of the fleet registry's port (`ProcessesPort`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from chronoq.fleet.records import RECENT, Fleet
from chronoq.storage.base import ProcessBeatParams, ProcessListParams
from chronoq.storage.rows import process_args, process_record
from chronoq.storage.sql.dialect import SqlDialect


class ProcessesSql(SqlDialect):
    """Records of the processes of the fleet, on the database clock."""

    def process_beat(self, params: ProcessBeatParams) -> None:
        args = process_args(params.info) | {
            "ttl": self._seconds_arg(params.ttl),
            "now": self._pinned(params.now),
        }
        with self._write() as db:
            db.execute(self.Q["process_beat"], args)

    def process_stop(self, process_id: str, now: datetime | None = None) -> bool:
        args = {"id": process_id, "now": self._pinned(now)}
        with self._write() as db:
            return int(db.execute(self.Q["process_stop"], args).rowcount) > 0

    def process_list(self, params: ProcessListParams) -> Fleet:
        args = {
            "all": params.all,
            "recent": self._seconds_arg(params.recent.total_seconds()),
            "now": self._pinned(params.now),
        }
        with self._read() as db:
            rows = db.execute(self.Q["process_list"], args).fetchall()
        db_now = self._time(rows[0]["db_now"])
        assert db_now is not None
        records = [process_record(row, self._time, self._list) for row in rows if row["id"]]
        return Fleet(records, db_now)

    def process_prune(self, recent: timedelta = RECENT) -> int:
        args = {"recent": self._seconds_arg(recent.total_seconds()), "now": self._clock()}
        with self._write() as db:
            return int(db.execute(self.Q["process_prune"], args).rowcount)
