"""The jobs' part of the store port that producers and workers use: enqueue, claim, finish,
leases, and the wake-ups of both.

Its statements are in each dialect's `jobs.sql`. Every write a worker makes is fenced by the
job's lease token: a write whose token is stale matches no row, and the method reports it by
leaving the id out of its result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from chronoq.core.enqueue import Enqueued
from chronoq.core.jobs import Claim, JobProgress, Outcome, RescueResult, Wakeup


# JobInsertParams, JobFinishParams and JobLeaseRef are not frozen: one is built per job on the
# hot paths, and a frozen dataclass costs three times as much to build (object.__setattr__ per
# field). Nothing mutates them, but for the enqueue's tracer, which stamps `trace_context` on
# the jobs it is about to insert (chronoq.observability.tracing).
@dataclass(slots=True)
class JobInsertParams:
    """One job to enqueue. `payload_json` is already validated, encoded JSON of an object.
    `unique_for` (seconds, with a `key`): an enqueue of the key within that period of the
    enqueue of the job that took it returns that job, finished or not. `trace_context`: the
    W3C trace context of the enqueue as encoded JSON (`chronoq.otel`)."""

    queue: str
    task: str
    payload_json: str
    run_at: datetime | None = None
    delay_seconds: float = 0.0
    priority: int = 0
    max_attempts: int | None = None
    lease_seconds: float = 60.0
    key: str | None = None
    misfire: str = "run_late"
    misfire_grace: float | None = None
    rate_key: str | None = None
    schedule: str | None = None
    tick: datetime | None = None
    ticks: int = 1
    unique_for: float | None = None
    trace_context: str | None = None


# What a store answers for each job it inserts is what enqueue returns (`Enqueued`: the id,
# and whether the job was created or a job already held its key): one object a job, where a
# store record turned into the app's own made two (a bulk enqueue makes 100,000 of them).
JobInsertResult = Enqueued


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
    """How one attempt ended. `retry_delay` (seconds) applies to `Outcome.RETRY` only.
    `keep_place` retries at once in the job's place in line (its run_at is kept), as the lease
    rescue does; a `skip` job gets a fresh grace instead. `output_json` (JSON text, already
    checked against the output limit) is stored with a `DONE` outcome only."""

    id: int
    lease_token: int
    outcome: Outcome
    retry_delay: float = 0.0
    error: dict[str, Any] | None = None
    keep_place: bool = False
    output_json: str | None = None


@dataclass(slots=True)
class JobLeaseRef:
    """A claimed job as its owner knows it: heartbeats and releases are fenced by the token."""

    id: int
    lease_token: int


@dataclass(frozen=True, slots=True)
class JobHeartbeatResult:
    """What a heartbeat of some attempts found: `renewed`, the ids whose lease now runs on;
    `cancelled`, the ids whose job was cancelled while the attempt held it (same token), which
    the worker stops. Any other id is no longer the attempt's: its lease lapsed and the job was
    rescued, or it ended."""

    renewed: set[int] = field(default_factory=set)
    cancelled: set[int] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class JobRescueParams:
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobHandOffParams:
    """Give claimed jobs back without using an attempt, due again `delay` seconds from now (or
    at their own run_at, if later): a worker that does not know a job's task hands it to the
    live processes that do (a rolling deploy), and must not claim it again at once."""

    refs: Sequence[JobLeaseRef]
    delay: float


class JobsPort(Protocol):
    """Enqueue, claim, finish: the statements on the hot paths."""

    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]:
        """Enqueue jobs in order. With `conn`, run inside the caller's open transaction."""
        ...

    def job_insert_stream(self, params: Iterable[JobInsertParams]) -> list[JobInsertResult]:
        """Enqueue jobs in order, in one transaction of the store's own, taking each job from
        `params` only as it is written, so producing them (the caller's objects, validation,
        encoding) overlaps with the database's work, and a long iterator is never held whole.
        Keyless jobs go in bulk; from the first keyed one on, the rest are stored as
        `job_insert_many` stores a batch with keys. If `params` raises, nothing is stored."""
        ...

    def job_claim_with_wakeup(self, params: JobClaimParams) -> Claim:
        """Claim, and in the same round trip learn when the next pending job falls due (after
        the claim's clock) and when the next lease expires."""
        ...

    def job_finish_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        """Record how attempts ended; return the ids whose lease token still matched. A
        cancelled outcome is also recorded for an attempt whose job was cancelled while it ran
        (the job stays cancelled, the attempt joins its history); any other outcome of such an
        attempt is refused, as its result no longer counts."""
        ...

    def job_complete_in(self, conn: Any, ref: JobLeaseRef, output_json: str | None = None) -> bool:
        """Mark the job done inside the caller's transaction, fenced by its token, storing
        `output_json` as its output."""
        ...

    def job_heartbeat_many(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress] | None = None
    ) -> JobHeartbeatResult:
        """Extend the leases of running attempts, and name those whose job was cancelled while
        they held it; both fenced by the token (see `JobHeartbeatResult`). `progress` (by job
        id) is stored on the attempts it names that are still running under their token."""
        ...

    def job_cancelled_among(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        """The ids of these attempts whose job was cancelled while they held it (the status is
        cancelled and the token is theirs): a worker asks about the results it had refused, to
        tell a cancel from a lost lease."""
        ...

    def job_release_many(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        """Give claimed-but-unstarted jobs back without using an attempt."""
        ...

    def job_hand_off_many(self, params: JobHandOffParams) -> set[int]:
        """Give claimed jobs back without using an attempt, due again after a delay (see
        `JobHandOffParams`); the ids whose lease token still matched."""
        ...

    def job_rescue_expired(self, params: JobRescueParams) -> RescueResult: ...

    def job_next_wakeup(self, queues: Sequence[str]) -> Wakeup: ...

    def job_watch(self, job_id: int) -> None:
        """Someone listening on a finish listener is about to look at job `job_id` and wait
        for it to end: its end must wake them. Call it after listening starts and before the
        first look. On PostgreSQL it marks the job, whose finish is then notified (the finishes
        of jobs nobody waits for notify no one); SQLite signals every commit anyway."""
        ...
