"""The shared SQL of the jobs' port for operators (`JobAdminPort`): look-ups and searches,
cancelling, dead letters, counts and pruning.

The overview differs per dialect and stays in each store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chronoq.core.jobs import Job, Stat
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    DeadRequeueResult,
    JobListParams,
    JobPruneParams,
)
from chronoq.storage.rows import stats_from_rows, storable_id
from chronoq.storage.sql.dialect import Connection, SqlDialect


class JobAdminSql(SqlDialect):
    """Reading and administering jobs."""

    def job_get(self, job_id: int) -> Job | None:
        if not storable_id(job_id):
            return None  # no job has it, and the drivers refuse to send it
        with self._read() as db:
            row = db.execute(self.Q["job_get"], {"id": job_id}).fetchone()
        return self._job(row) if row else None

    def job_list(self, params: JobListParams) -> list[Job]:
        args = {
            "statuses": self._array([str(s) for s in params.statuses]),
            "queue": params.queue,
            "task": params.task,
            "worker": params.worker,
            "key": params.key,
            "created_after": self._time_arg(params.created_after),
            "created_before": self._time_arg(params.created_before),
            "before_id": params.before_id,
            "limit": params.limit,
        }
        with self._read() as db:
            return [self._job(row) for row in db.execute(self.Q["job_list"], args)]

    def job_cancel(self, job_id: int) -> Job | None:
        """Cancel a pending or running job; return the job as it now is (None: no such id)."""
        if not storable_id(job_id):
            return None
        with self._write() as db:
            args = {"id": job_id, "now": self._clock()}
            row = db.execute(self.Q["job_cancel"], args).fetchone()
            if row is None:
                row = db.execute(self.Q["job_get"], {"id": job_id}).fetchone()
        return self._job(row) if row else None

    def dead_requeue(self, params: DeadRequeueParams) -> DeadRequeueResult:
        args = self._dead_selection(params.ids, params.queue, params.task)
        given = set(params.ids or ())
        with self._transaction() as db:
            wanted = {row["id"] for row in db.execute(self.Q["dead_ids"], args).fetchall()}
            requeued = {row["id"] for row in db.execute(self.Q["dead_requeue"], args).fetchall()}
            # In the same transaction, so a job purged meanwhile is not called "not dead".
            found = self._existing_ids(db, args) if given else set()
        return DeadRequeueResult(
            requeued=sorted(requeued),
            key_conflicts=sorted(wanted - requeued),
            not_dead=sorted(found - wanted),
            not_found=sorted(given - found),
        )

    def _existing_ids(self, db: Connection, args: Mapping[str, Any]) -> set[int]:
        return {row["id"] for row in db.execute(self.Q["job_ids_existing"], args).fetchall()}

    def dead_purge(self, params: DeadPurgeParams) -> int:
        args = self._dead_selection(params.ids, params.queue, params.task)
        args["older_than"] = self._seconds_arg(params.older_than.total_seconds())
        with self._write() as db:
            return int(db.execute(self.Q["dead_purge"], args).rowcount)

    def _dead_selection(
        self, ids: Sequence[int] | None, queue: str | None, task: str | None
    ) -> dict[str, Any]:
        """The dead jobs a requeue or purge names: ids no job can have are left out."""
        return {
            "all": ids is None,
            "ids": self._array([job_id for job_id in ids or [] if storable_id(job_id)]),
            "queue": queue,
            "task": task,
            "now": self._clock(),
        }

    def stats(self) -> list[Stat]:
        with self._read() as db:
            rows = db.execute(self.Q["stats"]).fetchall()
        return stats_from_rows(rows)

    def job_prune(self, params: JobPruneParams) -> int:
        """Delete up to `limit` old finished jobs, key buckets that have refilled, and the
        records of keys whose period has passed."""
        args = {
            "older_than": self._seconds_arg(params.older_than.total_seconds()),
            "limit": params.limit,
            "now": self._clock(),
        }
        with self._write() as db:
            deleted = int(db.execute(self.Q["job_prune"], args).rowcount)
            db.execute(self.Q["unique_keys_prune"], args)
            db.execute(self.Q["key_buckets_prune"], args)
            db.execute(self.Q["key_buckets_orphans_prune"], args)
        return deleted
