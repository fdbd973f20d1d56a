"""The jobs' part of the store port that operators use: look-ups and searches, cancelling,
dead letters, counts, the dashboard's overview, and pruning.

Its statements are in each dialect's `jobs.sql`, beside the workers' (`chronoq.storage.port.jobs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from chronoq.core.jobs import Job, JobStatus, Stat


@dataclass(frozen=True, slots=True)
class JobListParams:
    """A search, newest first. `before_id` is the cursor: the last id of the previous page.
    `created_after` (inclusive) and `created_before` (exclusive) bound `created_at`."""

    statuses: Sequence[JobStatus] = ()
    queue: str | None = None
    task: str | None = None
    limit: int = 100
    before_id: int | None = None
    worker: str | None = None  # the jobs this worker holds (or last held)
    key: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class DeadRequeueParams:
    """Requeue the dead jobs with these ids, or every dead job when `ids` is None; `queue` and
    `task` narrow either selection."""

    ids: Sequence[int] | None = None
    queue: str | None = None
    task: str | None = None


@dataclass(slots=True)
class DeadRequeueResult:
    """What a requeue did with each job it was asked about, each list in id order:
    `requeued`; `key_conflicts`, dead jobs kept dead because a live job holds their key;
    and, for ids given, `not_dead`, jobs that exist but are not dead jobs of the selection
    (not dead, or of another queue or task), apart from `not_found`, ids no job has."""

    requeued: list[int] = field(default_factory=list)
    key_conflicts: list[int] = field(default_factory=list)
    not_dead: list[int] = field(default_factory=list)
    not_found: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DeadPurgeParams:
    """Delete dead jobs that died `older_than` ago; `ids`, `queue` and `task` narrow it."""

    older_than: timedelta = timedelta(0)
    queue: str | None = None
    task: str | None = None
    ids: Sequence[int] | None = None


@dataclass(frozen=True, slots=True)
class JobPruneParams:
    """Delete finished jobs (done, cancelled, skipped) that finished `older_than` ago; dead
    jobs are kept for inspection (`chronoq dead purge` removes them)."""

    older_than: timedelta
    limit: int = 10_000


# Upper bounds (seconds) of the due→start lateness buckets the overview counts done jobs in;
# a last bucket holds what is later than the last bound.
LATENESS_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True, slots=True)
class OverviewParams:
    """What the dashboard and the metrics read: jobs finished in the last `window` seconds, in
    buckets of `bucket` seconds aligned to the epoch (the window starts at a bucket's start).
    `since` reads only the jobs finished from that instant on (a bucket's start), for a reader
    that keeps the older buckets itself; `window=0` reads no finished job at all."""

    window: float = 300.0
    bucket: float = 10.0
    since: datetime | None = None


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """One queue now: pending (`due` of them due now), running, and how long the oldest due
    job has waited (seconds, 0 when none is due)."""

    queue: str
    pending: int = 0
    due: int = 0
    running: int = 0
    dead: int = 0
    oldest_due_age: float = 0.0


@dataclass(frozen=True, slots=True)
class FinishedBucket:
    """Jobs of one queue that ended in one status within one bucket of the window. For done
    jobs, `lateness` counts them by due→start lateness, one count per `LATENESS_BOUNDS`
    bucket (a job in the bucket of the first bound it is below) and one for later jobs."""

    queue: str
    status: JobStatus
    start: datetime
    count: int
    lateness: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Overview:
    """Raw figures on the database clock."""

    db_now: datetime
    queues: list[QueueCounts]
    finished: list[FinishedBucket]


class JobAdminPort(Protocol):
    """Reading and administering jobs."""

    def job_get(self, job_id: int) -> Job | None: ...

    def job_list(self, params: JobListParams) -> list[Job]: ...

    def job_cancel(self, job_id: int) -> Job | None:
        """Cancel a pending or running job; return the job as it now is (None: no such id). A
        running job keeps its worker and lease token, so that attempt's next heartbeat tells
        its worker (see `JobHeartbeatResult`); a pending one forgets its last worker."""
        ...

    def dead_requeue(self, params: DeadRequeueParams) -> DeadRequeueResult: ...

    def dead_purge(self, params: DeadPurgeParams) -> int: ...

    def stats(self) -> list[Stat]: ...

    def overview(self, params: OverviewParams) -> Overview:
        """Per-queue counts now, and jobs finished in the window by bucket."""
        ...

    def job_prune(self, params: JobPruneParams) -> int:
        """Delete up to `limit` old finished jobs, key buckets that have refilled, and the
        records of keys whose period has passed."""
        ...
