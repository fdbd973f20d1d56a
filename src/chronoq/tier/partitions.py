"""What a partition leader holds, shared by its stager and its mover (`Led`).

```
 TierLeader ── leadership: partitions gained and lost ──► Led.partitions
    ├── Stager (stager.py) ── remember(timer) ──► Led.known + Led.wheel ◄── expire ── Mover
    └── Mover  (mover.py)  ── expect_in_redis ──┘              (mover.py)
 either, when Redis refuses a write: refused (a newer epoch: fenced) or lost (take over, re-stage)
```

The stager and the mover run on two threads and hold `lock` only for their bookkeeping, never
across a PostgreSQL round trip.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from chronoq.errors import ChronoqError
from chronoq.observability.events import MoveRefused, Observers, PartitionReconciled
from chronoq.tier.dbclock import DbClock
from chronoq.tier.ports import MovedEntry, Timer, TimerStore
from chronoq.tier.wheel import TimingWheel

log = logging.getLogger("chronoq.tier")

# A wheel key is (partition, job id, token); this job id marks "the earliest timer Redis still
# holds" (one staged by a predecessor, say), so the partition is moved when it falls due too.
NEXT_IN_REDIS = -1


@dataclass(slots=True)
class Known:
    """A job staged by this leader: as staged, and when and onto which entry it was moved."""

    partition: int
    token: int
    due_ms: int
    queue: str
    moved_at: float | None = None
    entry: str | None = None  # its stream entry's id, when the move said which


@dataclass(slots=True)
class Partition:
    number: int
    epoch: int
    trusted_until: float
    fenced: bool = False
    jobs: set[int] = field(default_factory=set)
    next_trim: float = 0.0
    lost_at: float | None = None
    staged_since_lost: int = 0
    next_in_redis_ms: int = 0
    # When Redis first refused this epoch as stale (see TierLeader._override_stale).
    stale_since: float | None = None
    # Redis lost the partition and it is not taken over again yet: nothing is written for it.
    retake: bool = False


class Led:
    """The partitions led, the jobs staged for them (`known`) and the wheel their timers wait
    in; `restage` asks the stager for a full pass at once."""

    def __init__(
        self,
        timers: TimerStore,
        events: Observers,
        *,
        tick: float,
        monotonic: Callable[[], float],
        restage: Callable[[], None],
    ) -> None:
        self.timers = timers
        self.events = events
        self._monotonic = monotonic
        self._restage = restage
        self.clock = DbClock(monotonic)
        self.wheel: TimingWheel[tuple[int, int, int]] = TimingWheel(tick=tick, clock=monotonic)
        self.partitions: dict[int, Partition] = {}
        self.known: dict[int, Known] = {}
        # The stager and the mover share the wheel, the known jobs and the partitions; each
        # holds the lock only for its bookkeeping, never across a PostgreSQL round trip.
        self.lock = threading.RLock()

    def acting(self) -> list[Partition]:
        """The partitions this leader may write for now (inside the trust window, unfenced,
        and known to Redis)."""
        now = self._monotonic()
        return [p for p in self.partitions.values() if self.may_act(p, now)]

    def may_act(self, part: Partition, now: float | None = None) -> bool:
        at = self._monotonic() if now is None else now
        return self.still_leads(part) and not part.retake and at < part.trusted_until

    def still_leads(self, part: Partition) -> bool:
        return self.partitions.get(part.number) is part and not part.fenced

    def remember(self, part: Partition, timer: Timer) -> None:
        old = self.known.get(timer.job_id)
        if old is not None:
            self.wheel.cancel((part.number, timer.job_id, old.token))
        self.known[timer.job_id] = Known(part.number, timer.token, timer.due_ms, timer.queue)
        part.jobs.add(timer.job_id)
        self.wheel.add((part.number, timer.job_id, timer.token), self.clock.deadline(timer.due_ms))

    def adopt(self, part: Partition, timer: Timer, entry: MovedEntry, at: float) -> None:
        """A job whose entry is already on a stream (moved by a predecessor, or by this leader
        before it lost track): known as moved at `at`, no timer in the wheel."""
        old = self.known.get(timer.job_id)
        if old is not None:
            self.wheel.cancel((part.number, timer.job_id, old.token))
        self.known[timer.job_id] = Known(
            part.number, timer.token, timer.due_ms, timer.queue, moved_at=at, entry=entry.entry_id
        )
        part.jobs.add(timer.job_id)

    def moved(self, entries: tuple[MovedEntry, ...], at: float) -> None:
        """The stream entries a move added, for the jobs this leader staged."""
        for entry in entries:
            known = self.known.get(entry.job_id)
            if known is not None and known.token == entry.token:
                known.moved_at = at
                known.entry = entry.entry_id

    def drop(self, part: Partition, job_id: int) -> Known | None:
        """Forget one job (no longer pending in the horizon), and its timer in the wheel."""
        known = self.known.pop(job_id, None)
        part.jobs.discard(job_id)
        if known is not None:
            self.wheel.cancel((part.number, job_id, known.token))
        return known

    def forget(self, part: Partition) -> None:
        for job_id in list(part.jobs):
            self.drop(part, job_id)
        self.wheel.cancel((part.number, NEXT_IN_REDIS, 0))

    def expect_in_redis(self, part: Partition, ms: int) -> None:
        """Move the partition again when its earliest timer in Redis falls due, whether or
        not this leader staged it."""
        key = (part.number, NEXT_IN_REDIS, 0)
        if key not in self.wheel or ms < part.next_in_redis_ms:
            part.next_in_redis_ms = ms
            self.wheel.add(key, self.clock.deadline(ms))

    # -- when Redis refuses a write -------------------------------------------------------

    def refused(self, part: Partition, why: str) -> None:
        self.events.emit(MoveRefused(part.number, part.epoch, why))
        log.warning(
            "Redis refused a write for partition %d (epoch %d): %s",
            part.number,
            part.epoch,
            "a newer leader holds it; acting no more for it" if why == "stale" else why,
            extra={"action": "tier.refused", "partition": part.number, "why": why},
        )
        if why == "stale":
            part.fenced = True
            if part.stale_since is None:
                part.stale_since = self._monotonic()
            self.forget(part)

    def lost(self, part: Partition) -> None:
        """Redis has no record of the partition: take it over again and re-stage."""
        if part.lost_at is None:
            part.lost_at = self._monotonic()
            part.staged_since_lost = 0
            self.refused(part, "lost")
        self.forget(part)
        part.retake = True
        self.retake(part)

    def retake(self, part: Partition) -> None:
        """Take a lost partition over again, only inside the trust window: a leader paused
        past its lease must not record its old epoch in a Redis that restarted empty (its
        successor would find the partition taken by a lower epoch). Outside it, the next
        leadership step that trusts the partition again calls this again."""
        if not part.retake or not self.still_leads(part):
            return
        if self._monotonic() >= part.trusted_until:
            return
        try:
            takeover = self.timers.take_over(part.number, part.epoch)
        except ChronoqError as exc:
            log.warning("cannot take partition %d over again: %s", part.number, exc)
            return
        if not takeover.accepted:
            self.refused(part, "stale")
            return
        part.retake = False
        self._restage()

    def reconciled(self, part: Partition) -> None:
        assert part.lost_at is not None
        seconds = self._monotonic() - part.lost_at
        self.events.emit(PartitionReconciled(part.number, part.staged_since_lost, seconds))
        log.info(
            "partition %d reconciled: %d timers staged again in %.3f s",
            part.number,
            part.staged_since_lost,
            seconds,
            extra={"action": "tier.reconciled", "partition": part.number},
        )
        part.lost_at = None
