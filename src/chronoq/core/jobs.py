"""Jobs, their states, and what a worker reports about an attempt.

The job state machine (`JobStatus`):

```
            enqueue                 claim (attempt += 1, new fencing token, lease)
 (new) ───────────────► pending ──────────────────────────► running
                         ▲   ▲                               │  │  │
     retry: run_at =     │   └── lease expired (rescuer) ────┘  │  │ success ─► done
     now + full jitter ──┘                                      │  └ Discard / cancel ─► cancelled
                                attempts >= max_attempts ───────┴──► dead  (inspect, requeue)
 pending past its misfire grace with policy "skip" ─► skipped
```
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, make_dataclass, replace
from datetime import datetime
from typing import Any

# The largest job id a store can hold: both stores use signed 64-bit integers, and the drivers
# refuse to send larger ones.
MAX_ID = 2**63 - 1


class JobStatus(enum.StrEnum):
    """The job state machine (drawn in this module's docstring)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # picked up later than its misfire grace, with the policy "skip"

    @property
    def is_final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset({JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED, JobStatus.SKIPPED})


class Outcome(enum.StrEnum):
    """How an attempt ended, as the worker reports it to the store."""

    DONE = "done"
    RETRY = "retry"
    DEAD = "dead"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Job:
    """A job row as the store returns it. Times are aware UTC datetimes."""

    id: int
    queue: str
    task: str
    payload: dict[str, Any]
    status: JobStatus
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int | None  # None until claimed: the task's setting, filled in at claim
    lease_seconds: float
    lease_token: int
    locked_until: datetime | None
    worker_id: str | None
    key: str | None
    errors: list[dict[str, Any]]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    misfire: str = "run_late"  # "run_late" or "skip" (see chronoq.core.misfire)
    misfire_grace: float | None = None  # seconds; how late "skip" still runs the job
    rate_key: str | None = None
    schedule: str | None = None  # the schedule that fired the job, if any
    tick: datetime | None = None  # the tick it stands for
    ticks: int = 1  # ticks it stands for: more than 1 when missed ticks were coalesced
    # Writes refused because they named a stale lease token (a worker that lost the job).
    fence_rejections: int = 0
    # What the handler returned (decoded JSON), stored with the completion; None until done.
    output: Any = None
    # How far the attempt has come (0..1) and what it said, as its last heartbeat carried them.
    progress: float | None = None
    progress_note: str | None = None
    # The W3C trace context (traceparent, tracestate) of the enqueue, when it was traced
    # (chronoq.otel): every attempt's span links to it.
    trace_context: dict[str, str] | None = None

    @property
    def out_of_attempts(self) -> bool:
        """Was this attempt the last one allowed?"""
        return self.max_attempts is not None and self.attempts >= self.max_attempts

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form used by `--json` output (times as ISO 8601 with offset)."""
        return {
            "id": self.id,
            "queue": self.queue,
            "task": self.task,
            "payload": self.payload,
            "status": str(self.status),
            "priority": self.priority,
            "run_at": _iso(self.run_at),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "lease_seconds": self.lease_seconds,
            "lease_token": self.lease_token,
            "locked_until": _iso(self.locked_until),
            "worker_id": self.worker_id,
            "key": self.key,
            "errors": self.errors,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "misfire": self.misfire,
            "misfire_grace": self.misfire_grace,
            "rate_key": self.rate_key,
            "schedule": self.schedule,
            "tick": _iso(self.tick),
            "ticks": self.ticks,
            "fence_rejections": self.fence_rejections,
            "output": self.output,
            "progress": self.progress,
            "progress_note": self.progress_note,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


# A frozen dataclass's __init__ sets every field through `object.__setattr__`, a call each: for
# Job's 29 fields about 3.3 us, against 0.4 us for a mutable slotted dataclass's plain stores,
# and the worker builds a Job for every job it claims. `_JobSlots` declares the same slots in the
# same order, so an instance of it can become a Job by assigning its class (CPython allows it
# between classes whose layouts are the same): built that way, the value is a Job in every way,
# frozen included, at a seventh of the cost.
_JobSlots: Any = make_dataclass(
    "_JobSlots",
    [(f.name, f.type, field(default=f.default)) for f in fields(Job)],
    slots=True,
    eq=False,
    repr=False,
)


def build_job(*values: Any, **named: Any) -> Job:
    """`Job(*values, **named)`, built without the frozen dataclass's per-field calls."""
    job = _JobSlots(*values, **named)
    job.__class__ = Job
    built: Job = job
    return built


# The longest note `JobContext.progress` accepts, in characters.
PROGRESS_NOTE_LIMIT = 200


@dataclass(frozen=True, slots=True)
class JobProgress:
    """How far a running attempt has come: `fraction` of its work (0..1) and a short note."""

    fraction: float
    note: str | None = None

    @classmethod
    def checked(cls, fraction: object, note: object = None) -> JobProgress:
        """The progress a handler reported, or a ValueError naming what is wrong with it."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError(f"progress must be a number from 0 to 1, got {fraction!r}")
        if not 0.0 <= fraction <= 1.0:  # NaN fails this too
            raise ValueError(f"progress must be a number from 0 to 1, got {fraction!r}")
        if note is not None and not isinstance(note, str):
            raise ValueError(f"a progress note must be text, got {type(note).__name__}")
        if note is not None and len(note) > PROGRESS_NOTE_LIMIT:
            raise ValueError(
                f"a progress note is at most {PROGRESS_NOTE_LIMIT} characters, got {len(note)}"
            )
        if note is not None and ("\x00" in note or not _encodable(note)):
            raise ValueError("a progress note cannot hold NUL characters or lone surrogates")
        return cls(float(fraction), note)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Stat:
    """Number of jobs of one queue in one status."""

    queue: str
    status: JobStatus
    count: int


def stats_json(stats: Iterable[Stat]) -> dict[str, Any]:
    """The stats document, as `chronoq stats --json` prints it and `GET /api/v1/stats` answers:
    `{"queues": {queue: counts}, "totals": counts}`, where counts hold every status (zero when
    no job has it) and `total`, so the shape never depends on what the store holds."""
    queues: dict[str, dict[str, int]] = {}
    totals = _zero_counts()
    for stat in stats:
        counts = queues.setdefault(stat.queue, _zero_counts())
        for bucket in (counts, totals):
            bucket[str(stat.status)] += stat.count
            bucket["total"] += stat.count
    return {"queues": dict(sorted(queues.items())), "totals": totals}


def _zero_counts() -> dict[str, int]:
    return {str(status): 0 for status in JobStatus} | {"total": 0}


@dataclass(frozen=True, slots=True)
class Wakeup:
    """When a worker should look again, on the database clock."""

    db_now: datetime
    next_run_at: datetime | None
    next_lease_expiry: datetime | None

    def seconds_until_next(self) -> float | None:
        moments = [m for m in (self.next_run_at, self.next_lease_expiry) if m is not None]
        if not moments:
            return None
        return max(0.0, (min(moments) - self.db_now).total_seconds())

    def sooner(self, moment: datetime | None) -> Wakeup:
        """This wake-up, or an earlier one at `moment` (a rate limit's next token, say)."""
        if moment is None or (self.next_run_at is not None and self.next_run_at <= moment):
            return self
        return replace(self, next_run_at=moment)


@dataclass(frozen=True, slots=True)
class Claim:
    """What one claim returns: the jobs, and when to look again if it came back short."""

    jobs: list[Job]
    wakeup: Wakeup


@dataclass(slots=True)
class RescueResult:
    """Jobs whose lease had expired, put back to pending or dead."""

    requeued: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
