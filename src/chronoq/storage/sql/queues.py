"""The shared SQL of the queues' port (`QueuesPort`): pause, limits and key limits."""

from __future__ import annotations

from chronoq.core.ratelimit import KeyLimit
from chronoq.storage.base import QueueLimitParams, QueueRemoval, QueueSettings
from chronoq.storage.rows import queue_settings
from chronoq.storage.sql.dialect import SqlDialect


class QueuesSql(SqlDialect):
    """Queue settings, stored apart from the jobs."""

    def queue_list(self) -> list[QueueSettings]:
        with self._read() as db:
            rows = db.execute(self.Q["queue_list"], {"name": None}).fetchall()
        return [queue_settings(row) for row in rows]

    def queue_get(self, name: str) -> QueueSettings:
        with self._read() as db:
            row = db.execute(self.Q["queue_list"], {"name": name}).fetchone()
        return queue_settings(row) if row else QueueSettings(name)

    def queue_pause(self, name: str, paused: bool) -> QueueSettings:
        with self._write() as db:
            args = {"name": name, "paused": paused, "now": self._clock()}
            db.execute(self.Q["queue_pause"], args)
        return self.queue_get(name)

    def queue_limit(self, params: QueueLimitParams) -> QueueSettings:
        args = {
            "name": params.name,
            "rate": params.rate,
            "burst": params.burst if params.rate is not None else None,
            "concurrency": params.concurrency,
            "now": self._clock(),
        }
        with self._write() as db:
            db.execute(self.Q["queue_limit"], args)
        return self.queue_get(params.name)

    def key_limit_set(self, queue: str, limit: KeyLimit) -> QueueSettings:
        args = {"queue": queue, "pattern": limit.pattern, "rate": limit.rate, "burst": limit.burst}
        with self._transaction() as db:
            db.execute(self.Q["queue_ensure"], {"name": queue, "now": self._clock()})
            db.execute(self.Q["key_limit_set"], args)
        return self.queue_get(queue)

    def key_limit_remove(self, queue: str, pattern: str) -> bool:
        with self._write() as db:
            args = {"queue": queue, "pattern": pattern}
            return int(db.execute(self.Q["key_limit_remove"], args).rowcount) > 0

    def queue_names(self) -> list[str]:
        with self._read() as db:
            return [row["name"] for row in db.execute(self.Q["queue_names"]).fetchall()]

    def queue_remove(self, name: str) -> QueueRemoval:
        args = {"name": name}
        with self._transaction() as db:
            live = db.execute(self.Q["queue_live_counts"], args).fetchone()
            pending, running = int(live["pending"]), int(live["running"])
            if pending or running:
                return QueueRemoval(name, removed=False, pending=pending, running=running)
            removed = int(db.execute(self.Q["queue_remove"], args).rowcount) > 0
            db.execute(self.Q["queue_key_limits_remove"], args)
            db.execute(self.Q["queue_key_buckets_remove"], args)
        return QueueRemoval(name, removed=removed)
