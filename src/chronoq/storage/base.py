"""The store port: what the worker, the app and the CLI need from a database.

Every adapter (SQLite, PostgreSQL) implements `JobStore` and passes the one contract suite in
`tests/contract/`. Each method takes one params dataclass (Noun+Verb names) so options can grow
without changing signatures. Every write a worker makes is fenced by the job's lease token: a write
whose token is stale matches no row, and the method reports it by leaving the id out of its result.

Time: every decision (is a job due, when does a lease end, when does a retry run) is made on the
database clock. `now` fields exist so tests can pin that clock; leave them `None` in production.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from chronoq.core.enqueue import Enqueued
from chronoq.core.fleet import RECENT, Fleet, ProcessInfo
from chronoq.core.jobs import (
    Claim,
    Job,
    JobProgress,
    JobStatus,
    Outcome,
    RescueResult,
    Stat,
    Wakeup,
)
from chronoq.core.ratelimit import KeyLimit
from chronoq.core.schedules import Schedule


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


@dataclass(frozen=True, slots=True)
class JobClaimIdsParams:
    """Claim these jobs by id, each only while it is still pending with the lease token it was
    staged with and due on the database clock (tiered dispatch: a worker confirms the stream
    entries it read). The attempt starts exactly as in `job_claim_with_wakeup`: attempt + 1, a
    new token, the lease on the database clock, the task settings as in `JobClaimParams`."""

    refs: Sequence[JobLeaseRef]
    worker_id: str
    now: datetime | None = None
    leases: Mapping[str, float] = field(default_factory=dict)
    max_attempts: Mapping[str, int] = field(default_factory=dict)
    default_max_attempts: int = 20


@dataclass(frozen=True, slots=True)
class IdClaim:
    """What `job_claim_ids` did with each id it was given, exactly one of:

    `jobs`: claimed now. `early`: pending with that token but not yet due (id -> run_at): ask
    again at run_at. `busy`: locked by another transaction at this instant: ask again soon.
    `gone`: nothing to run for this entry (missing, no longer pending, the token moved on, its
    queue is paused or limited, or a `skip` misfire past its grace, now skipped): drop it. A
    limited queue's jobs are left to the database claim path, which enforces the limits.
    Each list is in id order."""

    jobs: list[Job]
    early: dict[int, datetime]
    busy: list[int]
    gone: list[int]
    db_now: datetime


@dataclass(frozen=True, slots=True)
class JobStageParams:
    """Pending jobs of these partitions (partition = id % `partition_count`) due within
    `horizon` of the database clock, with ids above `after_id`, in id order, at most `limit`.
    Jobs of paused queues and of queues with rate, concurrency or key limits are left out: they
    stay on the database claim path."""

    partitions: Sequence[int]
    partition_count: int
    horizon: timedelta
    after_id: int = 0
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class StageRow:
    id: int
    lease_token: int
    queue: str
    run_at: datetime


@dataclass(frozen=True, slots=True)
class Staging:
    rows: list[StageRow]
    db_now: datetime


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
class JobRescueParams:
    limit: int = 1000
    now: datetime | None = None


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


@dataclass(frozen=True, slots=True)
class JobHandOffParams:
    """Give claimed jobs back without using an attempt, due again `delay` seconds from now (or
    at their own run_at, if later): a worker that does not know a job's task hands it to the
    live processes that do (a rolling deploy), and must not claim it again at once."""

    refs: Sequence[JobLeaseRef]
    delay: float


@dataclass(frozen=True, slots=True)
class ProcessBeatParams:
    """Record or refresh a process in the fleet registry; it counts as alive for `ttl`
    seconds from now on the database clock, unless it beats again or stops."""

    info: ProcessInfo
    ttl: float
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProcessListParams:
    """Live processes, or with `all` also those that stopped or stopped refreshing within
    `recent` (older records are left out, and pruned)."""

    all: bool = False
    recent: timedelta = RECENT
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProcessSessionsEndParams:
    """End the database sessions of the worker `worker_id`, whose process has died, and wait
    until the server has let go of them, at most `timeout` seconds. A statement of theirs that
    was still executing (a claim waiting for a lock, say) is rolled back instead of committing
    after its client is gone. The worker's sessions are those named after it: see
    `chronoq.storage.dsn.with_session_name`."""

    worker_id: str
    timeout: float = 5.0


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


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's stored settings; a queue never configured is unpaused and unlimited."""

    name: str
    paused: bool = False
    rate: float | None = None
    burst: float | None = None
    concurrency: int | None = None
    key_limits: tuple[KeyLimit, ...] = ()

    @property
    def limited(self) -> bool:
        return self.rate is not None or self.concurrency is not None or bool(self.key_limits)


@dataclass(frozen=True, slots=True)
class QueueRemoval:
    """What `queue_remove` did: `removed` is True when stored settings were deleted. A queue
    with `pending` or `running` jobs keeps its settings (and `removed` is False)."""

    name: str
    removed: bool
    pending: int = 0
    running: int = 0

    @property
    def busy(self) -> bool:
        return self.pending > 0 or self.running > 0


@dataclass(frozen=True, slots=True)
class QueueLimitParams:
    """Set a queue's rate (jobs/s, with its bucket size) and concurrency; None removes each."""

    name: str
    rate: float | None = None
    burst: float | None = None
    concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class ScheduleUpsertParams:
    """A schedule's definition. An existing schedule keeps its cursor, counters and pause."""

    name: str
    cadence: str
    zone: str
    task: str
    payload_json: str
    queue: str
    priority: int
    misfire: str
    misfire_grace: float
    catch_up: int | None
    jitter: float
    origin: str = "cli"


@dataclass(frozen=True, slots=True)
class ScheduleDue:
    """Schedules with ticks to handle now, and when the next one falls due otherwise."""

    names: list[str]
    next_tick: datetime | None
    db_now: datetime


@dataclass(slots=True)
class ScheduleAdvance:
    """What one pass over a schedule decided: the tick jobs to insert (each with `schedule` and
    `tick` set, so a tick already fired is not inserted again), the new cursor and next tick,
    and the counters to add."""

    jobs: list[JobInsertParams] = field(default_factory=list)
    cursor: datetime | None = None
    next_tick: datetime | None = None
    late: int = 0
    skipped: int = 0
    coalesced: int = 0
    lateness_total: float = 0.0
    lateness_max: float = 0.0
    inserted: int = 0  # filled in by the store: tick jobs actually inserted


ScheduleDecision = Callable[[Schedule, datetime], ScheduleAdvance | None]


@dataclass(slots=True)
class MigrationChange:
    """What a migration run did: migrations applied, and migrations undone (newest first)."""

    applied: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LeaderTerm:
    """Who holds a duty: `term` grows by one at every change of holder."""

    duty: str
    holder: str
    term: int
    elected_at: datetime
    renewed_at: datetime
    expires_at: datetime


class LeaderElector(Protocol):
    """Elects one holder of a duty among any number of candidates.

    `attempt()` is called again and again by every candidate: it takes the duty when nobody
    holds it, renews it for its holder, and returns the term held, or None when another holds
    it or the store cannot confirm ours (step down at once: the leader must be sure).
    """

    holder: str

    def attempt(self) -> LeaderTerm | None: ...

    def resign(self) -> None: ...

    def close(self) -> None: ...


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

    def migrate_to(self, version: str | None) -> MigrationChange:
        """Bring the schema to `version` (None: the newest), applying up migrations or the
        down migrations of newer ones; a version that is no known migration is refused."""
        ...

    def db_now(self) -> datetime: ...

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

    def job_claim_ids(self, params: JobClaimIdsParams) -> IdClaim:
        """Claim by id (tiered dispatch); rows are locked in id order, skipping locked ones,
        so two workers confirming overlapping batches never deadlock."""
        ...

    def job_stage_candidates(self, params: JobStageParams) -> Staging:
        """Pending jobs a partition leader stages (see `JobStageParams`)."""
        ...

    def tier_partitions(self, requested: int) -> int:
        """The partition count of tiered dispatch, fixed at the first call on a store (which
        records `requested`); later calls return the recorded count whatever they ask."""
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

    # -- queues ---------------------------------------------------------------------------

    def queue_list(self) -> list[QueueSettings]: ...

    def queue_get(self, name: str) -> QueueSettings: ...

    def queue_pause(self, name: str, paused: bool) -> QueueSettings: ...

    def queue_limit(self, params: QueueLimitParams) -> QueueSettings: ...

    def key_limit_set(self, queue: str, limit: KeyLimit) -> QueueSettings: ...

    def key_limit_remove(self, queue: str, pattern: str) -> bool: ...

    def queue_names(self) -> list[str]:
        """Every queue with jobs (of any status) or stored settings, in byte order."""
        ...

    def queue_remove(self, name: str) -> QueueRemoval:
        """Delete a queue's stored settings (pause, limits, key limits and their buckets),
        unless it has pending or running jobs. A job enqueued on it afterwards finds it
        unpaused and unlimited, as a queue never configured."""
        ...

    # -- schedules ------------------------------------------------------------------------

    def schedule_upsert(self, params: ScheduleUpsertParams) -> bool:
        """Create or update a schedule; True when it was created."""
        ...

    def schedule_get(self, name: str) -> Schedule | None: ...

    def schedule_list(self) -> list[Schedule]: ...

    def schedule_pause(self, name: str, paused: bool) -> Schedule | None:
        """Pause: its tick jobs not yet due are cancelled. Resume: the cursor moves to now,
        so ticks that fell in the pause are not treated as missed."""
        ...

    def schedule_remove(self, name: str) -> bool:
        """Delete the schedule and cancel its pending tick jobs."""
        ...

    def schedule_due(self, lookahead: timedelta) -> ScheduleDue: ...

    def schedule_advance(self, name: str, decide: ScheduleDecision) -> ScheduleAdvance | None:
        """Lock the schedule, let `decide` plan the pass on the database clock, then insert its
        jobs and store its cursor and counters, all in one transaction. None: the schedule is
        gone or paused, or `decide` had nothing to do."""
        ...

    # -- the fleet registry ----------------------------------------------------------------

    def process_beat(self, params: ProcessBeatParams) -> None:
        """Record or refresh a process (see `ProcessBeatParams`)."""
        ...

    def process_stop(self, process_id: str, now: datetime | None = None) -> bool:
        """Mark a process stopped (it exited cleanly); False when no live record had that id."""
        ...

    def process_list(self, params: ProcessListParams) -> Fleet:
        """The processes, most recently seen first, read on the database clock."""
        ...

    def process_prune(self, recent: timedelta = RECENT) -> int:
        """Delete records that ended more than `recent` ago; the number deleted."""
        ...

    def process_sessions_end(self, params: ProcessSessionsEndParams) -> int:
        """End a dead worker's database sessions (see `ProcessSessionsEndParams`); how many
        were still open when the timeout ran out (0: none is left)."""
        ...

    # -- leadership -----------------------------------------------------------------------

    def leader_elector(self, duty: str, holder: str, ttl: float) -> LeaderElector: ...

    def leader_get(self, duty: str) -> LeaderTerm | None: ...

    def open_listener(self) -> ChangeListener: ...

    def open_finish_listener(self) -> ChangeListener:
        """Wakes a waiter when jobs may have reached a final state (done, dead, cancelled,
        skipped): LISTEN on PostgreSQL, the database's change signal on SQLite. It may wake for
        other changes too; the waiter looks at its job again. Only the ends of jobs passed to
        `job_watch` are sure to wake it."""
        ...

    def job_watch(self, job_id: int) -> None:
        """Someone listening on a finish listener is about to look at job `job_id` and wait
        for it to end: its end must wake them. Call it after listening starts and before the
        first look. On PostgreSQL it marks the job, whose finish is then notified (the finishes
        of jobs nobody waits for notify no one); SQLite signals every commit anyway."""
        ...

    def close(self) -> None: ...
