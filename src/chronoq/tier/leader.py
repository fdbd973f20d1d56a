"""Partition leaders: stage near-due jobs into Redis, and move them onto streams when due.

```
 PartitionElector.step() ── every step_interval ──► partitions led now (epoch, trusted until)
        │ gained: take_over(p, epoch) in Redis, then stage its whole horizon
        │ lost:   forget its timers (the next leader stages them again from PostgreSQL)
        ▼
 PostgreSQL ── job_stage_candidates ─► known jobs ──► TimerStore.stage(p, epoch, timers)
   (NOTIFY: new ids at once;                 │         └► TimingWheel.add((p, id, token), due)
    a full pass every stage_interval)        ▼
                            wheel.expire(now) ─► TimerStore.move_due(p, epoch, now) ─► streams
```

One thread runs the loop; a second only turns the store's change notifications into wake-ups.
The loop sleeps until the earliest of: the wheel's next bucket, the next leadership step, the
next staging pass, a notification. What the leader acts on is fenced twice: it acts for a
partition only inside the elector's trust window, and every write names the partition's epoch,
so a leader that was paused past its lease (and succeeded) has its writes refused by Redis; it
counts and logs the refusal and acts no more for that partition until elected again.

What PostgreSQL says is the truth, so every copy here can be lost: a new leader stages its
horizon again; Redis restarted empty or flushed is noticed at the next write ("lost") and the
partition is taken over and re-staged (reconciled); a job moved to a stream that is still
pending `restage_after` later is staged again (a duplicate entry is dropped by the claim, which
takes a job only while it is pending with the token it was staged with).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from chronoq.coordination.base import Leadership, PartitionElector
from chronoq.errors import ChronoqError
from chronoq.observability.events import (
    MoveRefused,
    Observers,
    PartitionLeaderChanged,
    PartitionReconciled,
    TimersMoved,
    TimersStaged,
)
from chronoq.storage.base import JobStageParams, StageRow
from chronoq.tier.dbclock import DbClock, due_ms
from chronoq.tier.ports import PartitionLost, StaleEpoch, Timer, TimerStore
from chronoq.tier.wheel import TimingWheel

if TYPE_CHECKING:
    from chronoq.config import Config
    from chronoq.runtime import Runtime

log = logging.getLogger("chronoq.tier")

# A wheel key is (partition, job id, token); this job id marks "the earliest timer Redis still
# holds" (one staged by a predecessor, say), so the partition is moved when it falls due too.
_NEXT_IN_REDIS = -1


@dataclass(frozen=True, slots=True)
class TierOptions:
    partitions: int = 16
    horizon: float = 60.0
    # A full pass over the horizon: picks up retries, rescues, requeues and resumed queues.
    stage_interval: float = 1.0
    step_interval: float = 0.5
    stage_batch: int = 1000
    move_batch: int = 1000
    restage_after: float = 30.0
    trim_interval: float = 10.0
    tick: float = 0.005

    @classmethod
    def from_config(cls, config: Config, partitions: int) -> TierOptions:
        return cls(
            partitions=partitions,
            horizon=config.stage_horizon,
            step_interval=min(0.5, config.leader_ttl / 10),
        )


@dataclass(slots=True)
class _Known:
    partition: int
    token: int
    due_ms: int
    moved_at: float | None = None


@dataclass(slots=True)
class _Partition:
    number: int
    epoch: int
    trusted_until: float
    fenced: bool = False
    jobs: set[int] = field(default_factory=set)
    next_trim: float = 0.0
    lost_at: float | None = None
    staged_since_lost: int = 0
    next_in_redis_ms: int = 0


class TierLeader:
    """Leads the partitions `elector` grants, for `app`, staging into and moving on `timers`."""

    def __init__(
        self,
        runtime: Runtime,
        elector: PartitionElector,
        timers: TimerStore,
        options: TierOptions,
        events: Observers,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.elector = elector
        self.timers = timers
        self.options = options
        self.events = events
        self._monotonic = monotonic
        self.clock = DbClock(monotonic)
        self.wheel: TimingWheel[tuple[int, int, int]] = TimingWheel(
            tick=options.tick, clock=monotonic
        )
        self.partitions: dict[int, _Partition] = {}
        self._known: dict[int, _Known] = {}
        self._high_water = 0
        self._wake = threading.Event()  # the mover: something may be due sooner
        self._stage_now = threading.Event()  # the stager: new jobs, or a partition to stage
        self._notified = threading.Event()
        # The stager and the mover share the wheel, the known jobs and the partitions; each
        # holds the lock only for its bookkeeping, never across a PostgreSQL round trip.
        self._lock = threading.RLock()
        self._failure: BaseException | None = None
        self._next_step = 0.0
        self._next_full = 0.0

    @property
    def holder(self) -> str:
        return self.elector.holder

    # -- the loops ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Lead until `stop` is set: this thread elects and moves; a second stages (reading
        the horizon must never hold up a move); a third listens for new jobs."""
        helpers = [
            threading.Thread(target=self._listen, args=(stop,), name="chronoq-tier-listen"),
            threading.Thread(target=self._stage_loop, args=(stop,), name="chronoq-tier-stage"),
        ]
        for helper in helpers:
            helper.daemon = True
            helper.start()
        try:
            while not stop.is_set():
                self.run_once()
                self._wake.wait(self._until_next())
                self._wake.clear()
        finally:
            stop.set()
            self._stage_now.set()
            for helper in helpers:
                helper.join(timeout=5.0)
            with self._lock:
                self._step_down_all("stopped")
        if self._failure is not None:
            raise self._failure

    def run_once(self) -> None:
        """One turn of the mover: leadership when its time has come, then what is due."""
        now = self._monotonic()
        if now >= self._next_step:
            self._next_step = now + self.options.step_interval
            self._lead()
        with self._lock:
            if self._acting():
                self._move_due()
                self._trim_due()

    def wake(self) -> None:
        self._wake.set()
        self._stage_now.set()

    def _until_next(self) -> float:
        moments = [self._next_step]
        with self._lock:
            deadline = self.wheel.next_deadline() if self._acting() else None
        if deadline is not None:
            moments.append(deadline)
        return max(0.0, min(moments) - self._monotonic())

    def _stage_loop(self, stop: threading.Event) -> None:
        """Thread: a full pass over the horizon every stage_interval, the new jobs at once."""
        try:
            while not stop.is_set():
                self._stage_now.wait(max(0.0, self._next_full - self._monotonic()))
                self._stage_now.clear()
                if stop.is_set():
                    return
                self.stage_once()
        except BaseException as exc:
            log.exception("the tier stager failed", extra={"action": "tier.failed"})
            self._failure = exc
            stop.set()
            self._wake.set()

    def stage_once(self) -> None:
        if self._monotonic() >= self._next_full:
            self._next_full = self._monotonic() + self.options.stage_interval
            self._notified.clear()
            self._stage(full=True)
        elif self._notified.is_set():
            self._notified.clear()
            self._stage(full=False)

    def _listen(self, stop: threading.Event) -> None:
        """Thread: a job became pending somewhere; stage the new ones now, not at the pass."""
        while not stop.is_set():
            try:
                listener = self.runtime.store.open_listener()
            except ChronoqError as exc:
                log.warning("tier leader cannot listen for new jobs: %s", exc)
                stop.wait(self.options.stage_interval)
                continue
            try:
                while not stop.is_set():
                    if listener.wait(0.5):
                        self._notified.set()
                        self._stage_now.set()
            except ChronoqError as exc:
                log.warning("tier leader lost its change listener: %s", exc)
            finally:
                listener.close()

    # -- leadership -----------------------------------------------------------------------

    def _lead(self) -> None:
        granted = self.elector.step()
        with self._lock:
            self._apply(granted)

    def _apply(self, granted: dict[int, Leadership]) -> None:
        for number in list(self.partitions):
            lead = granted.get(number)
            if lead is None:
                self._step_down(number, "lost the election")
            elif lead.epoch != self.partitions[number].epoch:
                self._step_down(number, "re-elected with a new epoch")
        for number, lead in sorted(granted.items()):
            part = self.partitions.get(number)
            if part is None:
                self._take_over(lead)
            else:
                part.trusted_until = lead.trusted_until

    def _take_over(self, lead: Leadership) -> None:
        try:
            takeover = self.timers.take_over(lead.partition, lead.epoch)
        except ChronoqError as exc:
            log.warning("cannot take partition %d over in Redis: %s", lead.partition, exc)
            return
        part = _Partition(lead.partition, lead.epoch, lead.trusted_until)
        part.fenced = not takeover.accepted
        self.partitions[lead.partition] = part
        self._next_full = 0.0  # stage its whole horizon at once
        self._stage_now.set()
        self.events.emit(PartitionLeaderChanged(lead.partition, self.holder, lead.epoch))
        log.info(
            "leading partition %d (epoch %d)",
            lead.partition,
            lead.epoch,
            extra={"action": "tier.lead", "partition": lead.partition, "epoch": lead.epoch},
        )
        if part.fenced:
            self._refused(part, "stale")

    def _step_down(self, number: int, why: str) -> None:
        part = self.partitions.pop(number)
        self._forget(part)
        self.events.emit(PartitionLeaderChanged(number, self.holder, None, why))
        log.info(
            "stopped leading partition %d: %s",
            number,
            why,
            extra={"action": "tier.step_down", "partition": number, "why": why},
        )

    def _step_down_all(self, why: str) -> None:
        for number in sorted(self.partitions):
            self._step_down(number, why)

    def _forget(self, part: _Partition) -> None:
        for job_id in part.jobs:
            known = self._known.pop(job_id, None)
            if known is not None:
                self.wheel.cancel((part.number, job_id, known.token))
        part.jobs.clear()
        self.wheel.cancel((part.number, _NEXT_IN_REDIS, 0))

    def _acting(self) -> list[_Partition]:
        """The partitions this leader may write for now (inside the trust window, unfenced)."""
        now = self._monotonic()
        return [p for p in self.partitions.values() if not p.fenced and now < p.trusted_until]

    def _refused(self, part: _Partition, why: str) -> None:
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
            self._forget(part)

    # -- staging --------------------------------------------------------------------------

    def _stage(self, *, full: bool) -> None:
        with self._lock:
            acting = {p.number: p for p in self._acting()}
            cursor = 0 if full else self._high_water
        if not acting:
            return
        seen: set[int] = set()
        while True:
            rows = self._candidates(sorted(acting), cursor)
            if rows is None:
                return
            self._stage_rows(acting, rows, seen)
            if len(rows) < self.options.stage_batch:
                break
            cursor = rows[-1].id
        if full:
            with self._lock:
                self._prune([p for p in acting.values() if self._still_leads(p)], seen)

    def _candidates(self, partitions: Sequence[int], after_id: int) -> list[StageRow] | None:
        params = JobStageParams(
            partitions=partitions,
            partition_count=self.options.partitions,
            horizon=timedelta(seconds=self.options.horizon),
            after_id=after_id,
            limit=self.options.stage_batch,
        )
        sent = self._monotonic()
        try:
            staging = self.runtime.store.job_stage_candidates(params)
        except ChronoqError as exc:
            log.warning("cannot read jobs to stage: %s", exc, extra={"action": "tier.stage"})
            return None
        self.clock.observe(staging.db_now, sent, self._monotonic())
        return staging.rows

    def _stage_rows(
        self, acting: dict[int, _Partition], rows: Sequence[StageRow], seen: set[int]
    ) -> None:
        now = self._monotonic()
        batches: dict[int, list[Timer]] = {}
        with self._lock:
            for row in rows:
                seen.add(row.id)
                self._high_water = max(self._high_water, row.id)
                number = row.id % self.options.partitions
                if number not in acting or not self._wants_staging(row, now):
                    continue
                batches.setdefault(number, []).append(
                    Timer(row.id, row.lease_token, row.queue, due_ms(row.run_at))
                )
        for number, timers in batches.items():
            self._stage_timers(acting[number], timers)

    def _wants_staging(self, row: StageRow, now: float) -> bool:
        known = self._known.get(row.id)
        if known is None or known.token != row.lease_token:
            return True
        if known.moved_at is None:
            return known.due_ms != due_ms(row.run_at)
        return now - known.moved_at >= self.options.restage_after

    def _stage_timers(self, part: _Partition, timers: list[Timer]) -> None:
        """Into Redis first, then into the wheel: a timer the wheel holds is in Redis."""
        with self._lock:
            # The rows were read outside the lock: the partition may have been given up, or
            # its trust window may have ended, meanwhile. Its next leader stages them.
            if not self._still_leads(part) or self._monotonic() >= part.trusted_until:
                return
        try:
            self.timers.stage(part.number, part.epoch, timers)
        except StaleEpoch:
            with self._lock:
                if self._still_leads(part):
                    self._refused(part, "stale")
            return
        except PartitionLost:
            with self._lock:
                if self._still_leads(part):
                    self._lost(part)
            return
        except ChronoqError as exc:
            log.warning("cannot stage partition %d: %s", part.number, exc)
            return
        with self._lock:
            if not self._still_leads(part):
                return  # stepped down meanwhile: the next leader stages them again
            for timer in timers:
                self._remember(part, timer)
            if part.lost_at is not None:
                part.staged_since_lost += len(timers)
        self.events.emit(TimersStaged(part.number, len(timers)))
        self._wake.set()

    def _still_leads(self, part: _Partition) -> bool:
        return self.partitions.get(part.number) is part and not part.fenced

    def _remember(self, part: _Partition, timer: Timer) -> None:
        old = self._known.get(timer.job_id)
        if old is not None:
            self.wheel.cancel((part.number, timer.job_id, old.token))
        self._known[timer.job_id] = _Known(part.number, timer.token, timer.due_ms)
        part.jobs.add(timer.job_id)
        self.wheel.add((part.number, timer.job_id, timer.token), self.clock.deadline(timer.due_ms))

    def _prune(self, parts: Iterable[_Partition], seen: set[int]) -> None:
        """After a full pass: jobs no longer pending in the horizon (run, cancelled) are
        forgotten; a staged timer of such a job still moves, and the claim drops it."""
        for part in parts:
            gone = [job_id for job_id in part.jobs if job_id not in seen]
            for job_id in gone:
                known = self._known.pop(job_id)
                part.jobs.discard(job_id)
                if known.moved_at is None:
                    # Still in Redis: keep a timer so the partition moves when it falls due.
                    self._expect_in_redis(part, known.due_ms)
            if part.lost_at is not None:
                self._reconciled(part)

    # -- moving ---------------------------------------------------------------------------

    def _move_due(self) -> None:
        expired = self.wheel.expire()
        if not expired:
            return
        due: dict[int, list[tuple[int, int, int]]] = {}
        for key in expired:
            due.setdefault(key[0], []).append(key)
        acting = {p.number: p for p in self._acting()}
        for number, keys in due.items():
            part = acting.get(number)
            if part is not None:
                self._move_partition(part, keys)

    def _move_partition(self, part: _Partition, keys: list[tuple[int, int, int]]) -> None:
        earliest = min(
            (self._known[k[1]].due_ms for k in keys if k[1] in self._known), default=None
        )
        now = self._monotonic()
        while True:
            now_ms = self.clock.now_ms()
            try:
                moved = self.timers.move_due(
                    part.number, part.epoch, now_ms, self.options.move_batch
                )
            except ChronoqError as exc:
                log.warning("cannot move partition %d: %s", part.number, exc)
                self._retry_soon(keys)
                return
            if moved.lost:
                self._lost(part)
                return
            if moved.stale:
                self._refused(part, "stale")
                return
            if moved.moved:
                late = 0.0 if earliest is None else max(0, now_ms - earliest) / 1000
                self.events.emit(TimersMoved(part.number, moved.moved, late))
            if moved.moved < self.options.move_batch:
                break
        for _, job_id, token in keys:
            known = self._known.get(job_id)
            if known is not None and known.token == token:
                known.moved_at = now
        if moved.next_due_ms is not None:
            self._expect_in_redis(part, moved.next_due_ms)

    def _expect_in_redis(self, part: _Partition, ms: int) -> None:
        """Move the partition again when its earliest timer in Redis falls due, whether or
        not this leader staged it."""
        key = (part.number, _NEXT_IN_REDIS, 0)
        if key not in self.wheel or ms < part.next_in_redis_ms:
            part.next_in_redis_ms = ms
            self.wheel.add(key, self.clock.deadline(ms))

    def _retry_soon(self, keys: list[tuple[int, int, int]]) -> None:
        """Redis did not answer: the wheel fires these again in a moment."""
        again = self._monotonic() + min(1.0, self.options.stage_interval)
        for key in keys:
            self.wheel.add(key, again)

    def _lost(self, part: _Partition) -> None:
        """Redis has no record of the partition: take it over again and re-stage."""
        if part.lost_at is None:
            part.lost_at = self._monotonic()
            part.staged_since_lost = 0
            self._refused(part, "lost")
        self._forget(part)
        try:
            takeover = self.timers.take_over(part.number, part.epoch)
        except ChronoqError as exc:
            log.warning("cannot take partition %d over again: %s", part.number, exc)
            return
        if not takeover.accepted:
            self._refused(part, "stale")
            return
        self._next_full = 0.0
        self._stage_now.set()

    def _reconciled(self, part: _Partition) -> None:
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

    def _trim_due(self) -> None:
        now = self._monotonic()
        for part in self._acting():
            if now < part.next_trim:
                continue
            part.next_trim = now + self.options.trim_interval
            try:
                self.timers.trim(part.number, part.epoch)
            except StaleEpoch:
                self._refused(part, "stale")
            except (PartitionLost, ChronoqError) as exc:
                log.debug("trim of partition %d skipped: %s", part.number, exc)
