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

The leader's thread elects and moves (`Mover`, mover.py); a second stages (`Stager`,
stager.py); a third only turns the store's change notifications into wake-ups. What they share,
the partitions led, the jobs staged and the wheel, is `Led` (partitions.py). The leader's thread
sleeps until the earliest of: the wheel's next bucket, the next leadership step, a stage that
added timers. What the leader acts on is fenced twice: it acts for a partition only inside the
elector's trust window, and every write names the partition's epoch, so a leader that was
paused past its lease (and succeeded) has its writes refused by Redis; it counts and logs the
refusal and acts no more for that partition until elected again.

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
from collections.abc import Callable
from typing import TYPE_CHECKING

from chronoq.coordination.base import Leadership, PartitionElector
from chronoq.errors import ChronoqError
from chronoq.observability.events import Observers, PartitionLeaderChanged
from chronoq.tier.mover import Mover
from chronoq.tier.partitions import Led, Partition
from chronoq.tier.ports import TimerStore
from chronoq.tier.stager import Stager

if TYPE_CHECKING:
    from chronoq.runtime import Runtime
    from chronoq.tier.options import TierOptions

log = logging.getLogger("chronoq.tier")


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
        self._wake = threading.Event()  # the mover: something may be due sooner
        self.led = Led(
            timers, events, tick=options.tick, monotonic=monotonic, restage=self._restage
        )
        self.stager = Stager(runtime, self.led, options, self._wake, monotonic)
        self.mover = Mover(self.led, options, monotonic)
        self._next_step = 0.0

    @property
    def holder(self) -> str:
        return self.elector.holder

    @property
    def partitions(self) -> dict[int, Partition]:
        return self.led.partitions

    # -- the loops ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Lead until `stop` is set: this thread moves; a second steps the elector (a slow
        coordination service must never hold up a move); a third stages (nor may reading the
        horizon); a fourth listens for new jobs."""
        helpers = [
            threading.Thread(target=self._elect, args=(stop,), name="chronoq-tier-elect"),
            threading.Thread(target=self.stager.listen, args=(stop,), name="chronoq-tier-listen"),
            threading.Thread(target=self.stager.run, args=(stop,), name="chronoq-tier-stage"),
        ]
        for helper in helpers:
            helper.daemon = True
            helper.start()
        try:
            while not stop.is_set():
                self._move_guarded(stop)
                self._wake.wait(self._until_next())
                self._wake.clear()
        finally:
            stop.set()
            self.stager.now.set()
            for helper in helpers:
                helper.join(timeout=5.0)
            with self.led.lock:
                self._step_down_all("stopped")
        if self.stager.failure is not None:
            raise self.stager.failure

    def run_once(self) -> None:
        """One turn on one thread: leadership when its time has come, then what is due."""
        if self._monotonic() >= self._next_step:
            self._lead()
        self._move()

    def stage_once(self) -> None:
        """One pass of the stager (see `Stager.stage_once`)."""
        self.stager.stage_once()

    def wake(self) -> None:
        self._wake.set()
        self.stager.now.set()

    def _elect(self, stop: threading.Event) -> None:
        """Thread: a leadership step every step_interval."""
        while not stop.is_set():
            try:
                self._lead()
            except Exception:
                log.exception("a leadership step failed", extra={"action": "tier.step_failed"})
            stop.wait(max(0.0, self._next_step - self._monotonic()))
        self._wake.set()

    def _move_guarded(self, stop: threading.Event) -> None:
        """One turn of the mover; one that fails unexpectedly is logged, and the next turn
        comes a step later (what it did not move is still in Redis, and the sweep finds it)."""
        try:
            self._move()
        except Exception:
            log.exception("a turn of the mover failed", extra={"action": "tier.move_failed"})
            stop.wait(self.options.step_interval)

    def _move(self) -> None:
        with self.led.lock:
            if self.led.acting():
                self.mover.trim_due()  # first: its sweep moves in this same turn
                self.mover.move_due()

    def _until_next(self) -> float:
        moments = [self._monotonic() + self.options.step_interval]
        with self.led.lock:
            deadline = self.led.wheel.next_deadline() if self.led.acting() else None
        if deadline is not None:
            moments.append(deadline)
        return max(0.0, min(moments) - self._monotonic())

    def _restage(self) -> None:
        self.stager.restage()

    # -- leadership -----------------------------------------------------------------------

    def _lead(self) -> None:
        self._next_step = self._monotonic() + self.options.step_interval
        granted = self.elector.step()
        with self.led.lock:
            self._apply(granted)
        self._wake.set()

    def _apply(self, granted: dict[int, Leadership]) -> None:
        if not granted:
            self._suspend()
            return
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
                self._confirm(part, lead)

    def _suspend(self) -> None:
        """A step that trusts nothing: an unreachable coordination service, a lost lease. Act
        for nothing from now on, but keep what is staged for a lease's time to live: a step
        that grants a partition again under the same epoch goes on without re-staging (nobody
        else can have led it meanwhile: its leader key never went away)."""
        now = self._monotonic()
        for number, part in list(self.partitions.items()):
            part.trusted_until = min(part.trusted_until, now)
            if now - part.trusted_until >= self.options.lease_ttl:
                self._step_down(number, "not confirmed for a lease's time to live")

    def _confirm(self, part: Partition, lead: Leadership) -> None:
        part.trusted_until = lead.trusted_until
        if part.retake:
            self.led.retake(part)
        elif part.fenced and part.stale_since is not None:
            self._override_stale(part)

    def _override_stale(self, part: Partition) -> None:
        """Redis refused this epoch as stale, yet the elector still grants it a lease's time to
        live later. Within one coordination service no leader can hold a higher epoch for the
        partition while ours stands (one leader key per partition; a successor's key, and its
        higher epoch, can only come after ours is gone). So the epoch stored in Redis was issued
        by a coordination service since rebuilt or replaced, whose counters started again
        lower; its leaders have lost their leases by now. Take the partition over anyway."""
        assert part.stale_since is not None
        if self._monotonic() - part.stale_since < self.options.lease_ttl:
            return
        try:
            takeover = self.timers.take_over(part.number, part.epoch, force=True)
        except ChronoqError as exc:
            log.warning("cannot take partition %d over in Redis: %s", part.number, exc)
            return
        log.warning(
            "partition %d: Redis held an epoch above %d for %.0f s while this leader still held"
            " it: the coordination service was rebuilt or replaced; taken over under epoch %d",
            part.number,
            part.epoch,
            self._monotonic() - part.stale_since,
            part.epoch,
            extra={"action": "tier.override", "partition": part.number, "epoch": part.epoch},
        )
        part.fenced = not takeover.accepted
        part.stale_since = None
        self.stager.restage()

    def _take_over(self, lead: Leadership) -> None:
        try:
            takeover = self.timers.take_over(lead.partition, lead.epoch)
        except ChronoqError as exc:
            log.warning("cannot take partition %d over in Redis: %s", lead.partition, exc)
            return
        part = Partition(lead.partition, lead.epoch, lead.trusted_until)
        self.partitions[lead.partition] = part
        self.stager.restage()  # stage its whole horizon at once
        self.events.emit(PartitionLeaderChanged(lead.partition, self.holder, lead.epoch))
        log.info(
            "leading partition %d (epoch %d)",
            lead.partition,
            lead.epoch,
            extra={"action": "tier.lead", "partition": lead.partition, "epoch": lead.epoch},
        )
        if not takeover.accepted:
            self.led.refused(part, "stale")

    def _step_down(self, number: int, why: str) -> None:
        part = self.partitions.pop(number)
        self.led.forget(part)
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
