"""The store port: what the worker, the app and the CLI need from a database.

Every adapter (SQLite, PostgreSQL) implements `JobStore` and passes the one contract suite in
`tests/contract/`. Each method takes one params dataclass (Noun+Verb names) so options can grow
without changing signatures. Every write a worker makes is fenced by the job's lease token: a write
whose token is stale matches no row, and the method reports it by leaving the id out of its result.

Time: every decision (is a job due, when does a lease end, when does a retry run) is made on the
database clock. `now` fields exist so tests can pin that clock; leave them `None` in production.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from chronoq.core.jobs import Claim, Job, JobStatus, Outcome, RescueResult, Stat, Wakeup


# JobInsertParams, JobFinishParams and JobLeaseRef are not frozen: one is built per job on the
# hot paths, and a frozen dataclass costs three times as much to build (object.__setattr__ per
# field). Nothing mutates them.
@dataclass(slots=True)
class JobInsertParams:
    """One job to enqueue. `payload_json` is already validated, encoded JSON of an object."""

    queue: str
    task: str
    payload_json: str
    run_at: datetime | None = None
    delay_seconds: float = 0.0
    priority: int = 0
    max_attempts: int | None = None
    lease_seconds: float = 60.0
    key: str | None = None


@dataclass(frozen=True, slots=True)
class JobInsertResult:
    """The id of the enqueued job; `created` is False when a live job already held the key."""

    id: int
    created: bool


@dataclass(frozen=True, slots=True)
class JobClaimParams:
    """`leases` maps task names to the worker's lease (seconds); other jobs keep their own.
    `max_attempts` maps task names to attempts for jobs enqueued without a number of their own,
    and `default_max_attempts` serves jobs of other tasks."""

    queues: Sequence[str]
    limit: int
    worker_id: str
    now: datetime | None = None
    leases: Mapping[str, float] = field(default_factory=dict)
    max_attempts: Mapping[str, int] = field(default_factory=dict)
    default_max_attempts: int = 20


@dataclass(slots=True)
class JobFinishParams:
    """How one attempt ended. `retry_delay` (seconds) applies to `Outcome.RETRY` only."""

    id: int
    lease_token: int
    outcome: Outcome
    retry_delay: float = 0.0
    error: dict[str, Any] | None = None


@dataclass(slots=True)
class JobLeaseRef:
    """A claimed job as its owner knows it: heartbeats and releases are fenced by the token."""

    id: int
    lease_token: int


@dataclass(frozen=True, slots=True)
class JobListParams:
    statuses: Sequence[JobStatus] = ()
    queue: str | None = None
    task: str | None = None
    limit: int = 100
    before_id: int | None = None


@dataclass(frozen=True, slots=True)
class JobRescueParams:
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class DeadRequeueParams:
    """Requeue the dead jobs with these ids, or every dead job when `ids` is None."""

    ids: Sequence[int] | None = None
    queue: str | None = None


@dataclass(slots=True)
class DeadRequeueResult:
    requeued: list[int] = field(default_factory=list)
    key_conflicts: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DeadPurgeParams:
    older_than: timedelta = timedelta(0)
    queue: str | None = None


class ChangeListener(Protocol):
    """Wakes a worker when jobs may have become claimable."""

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds; True when something changed."""
        ...

    def close(self) -> None: ...


class JobStore(Protocol):
    """The storage port. Adapters: `SqliteStore`, `PostgresStore`."""

    dsn_display: str

    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date)."""
        ...

    def db_now(self) -> datetime: ...

    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]:
        """Enqueue jobs in order. With `conn`, run inside the caller's open transaction."""
        ...

    def job_insert_stream(
        self, count: int, params: Iterable[JobInsertParams]
    ) -> list[JobInsertResult]:
        """Enqueue `count` keyless jobs in one transaction of the store's own, taking each job
        from `params` only as it is written, so producing them (validation, encoding) overlaps
        with the database's work. If `params` raises, or yields other than `count` jobs,
        nothing is stored."""
        ...

    def job_claim(self, params: JobClaimParams) -> list[Job]: ...

    def job_claim_with_wakeup(self, params: JobClaimParams) -> Claim:
        """Claim, and in the same round trip learn when the next pending job falls due (after
        the claim's clock) and when the next lease expires."""
        ...

    def job_finish_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        """Record how attempts ended; return the ids whose lease token still matched."""
        ...

    def job_complete_in(self, conn: Any, ref: JobLeaseRef) -> bool:
        """Mark the job done inside the caller's transaction, fenced by its token."""
        ...

    def job_heartbeat_many(self, refs: Sequence[JobLeaseRef]) -> set[int]: ...

    def job_release_many(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        """Give claimed-but-unstarted jobs back without using an attempt."""
        ...

    def job_rescue_expired(self, params: JobRescueParams) -> RescueResult: ...

    def job_next_wakeup(self, queues: Sequence[str]) -> Wakeup: ...

    def job_get(self, job_id: int) -> Job | None: ...

    def job_list(self, params: JobListParams) -> list[Job]: ...

    def job_cancel(self, job_id: int) -> Job | None:
        """Cancel a pending or running job; return the job as it now is (None: no such id)."""
        ...

    def dead_requeue(self, params: DeadRequeueParams) -> DeadRequeueResult: ...

    def dead_purge(self, params: DeadPurgeParams) -> int: ...

    def stats(self) -> list[Stat]: ...

    def open_listener(self) -> ChangeListener: ...

    def close(self) -> None: ...
