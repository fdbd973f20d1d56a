"""The shared SQL of the jobs' port for producers and workers (`JobsPort`): the streamed
enqueue, the lease rescue, and the fenced batch writes of heartbeats, releases and hand-offs.

The claim, bulk inserts and finishing differ per dialect and stay in each store.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import Any

from chronoq.core.jobs import JobProgress, RescueResult
from chronoq.storage.base import (
    JobHandOffParams,
    JobHeartbeatResult,
    JobInsertParams,
    JobInsertResult,
    JobLeaseRef,
    JobRescueParams,
)
from chronoq.storage.rows import heartbeat_result, rescue_result
from chronoq.storage.sql.dialect import SqlDialect

# From here on, keyless jobs enqueued together are stored in bulk: by COPY on PostgreSQL (below
# it, one multi-row INSERT beats setting a COPY up), by one executemany on SQLite.
BULK_THRESHOLD = 64


def goes_in_bulk(jobs: Sequence[JobInsertParams]) -> bool:
    """Whether jobs enqueued together are stored in bulk: BULK_THRESHOLD or more, none keyed."""
    return len(jobs) >= BULK_THRESHOLD and all(job.key is None for job in jobs)


def until_keyed(
    jobs: Iterable[JobInsertParams], keyed: list[JobInsertParams]
) -> Iterator[JobInsertParams]:
    """`jobs` up to the first with a key, which is put in `keyed`: a bulk path that cannot
    store keys hands that job, and the jobs after it, to one that can."""
    for job in jobs:
        if job.key is not None:
            keyed.append(job)
            return
        yield job


class JobsSql(SqlDialect):
    """Enqueue in bulk, rescue expired leases, and the fenced batch writes."""

    # -- enqueue ----------------------------------------------------------------------------

    def job_insert_stream(self, params: Iterable[JobInsertParams]) -> list[JobInsertResult]:
        jobs = iter(params)
        head = list(islice(jobs, BULK_THRESHOLD))
        if not goes_in_bulk(head):
            return self.job_insert_many([*head, *jobs])
        return self._insert_streamed(chain(head, jobs))

    @abstractmethod
    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]: ...

    @abstractmethod
    def _insert_streamed(self, jobs: Iterator[JobInsertParams]) -> list[JobInsertResult]:
        """`job_insert_stream` of at least BULK_THRESHOLD jobs, the first ones keyless: stored
        in bulk as they come, up to the first keyed one (`until_keyed`), which with the jobs
        after it is stored as `job_insert_many` stores a batch with keys, in one transaction."""

    def job_rescue_expired(self, params: JobRescueParams) -> RescueResult:
        args = {"limit": params.limit, "now": self._pinned(params.now)}
        with self._write() as db:
            rows = db.execute(self.Q["job_rescue_expired"], args).fetchall()
        return rescue_result(rows)

    def job_heartbeat_many(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress] | None = None
    ) -> JobHeartbeatResult:
        extra = self._progress_args(refs, progress or {})
        return heartbeat_result(self._fenced_rows("job_heartbeat_many", refs, **extra))

    def job_cancelled_among(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        if not refs:
            return set()
        with self._read() as db:
            rows = db.execute(self.Q["job_cancelled_among"], self._refs_args(refs)).fetchall()
        return {row["id"] for row in rows}

    def job_release_many(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        return self._fenced_refs("job_release_many", refs)

    def job_hand_off_many(self, params: JobHandOffParams) -> set[int]:
        delay = self._seconds_arg(max(0.0, params.delay))
        return self._fenced_refs("job_hand_off_many", params.refs, delay=delay)

    def _fenced_refs(self, query: str, refs: Sequence[JobLeaseRef], **extra: Any) -> set[int]:
        return {row["id"] for row in self._fenced_rows(query, refs, **extra)}
