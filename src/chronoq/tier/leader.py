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
        """Lead until `stop` is set: this thread elects and moves; a second stages (reading
        the horizon must never hold up a move); a third listens for new jobs."""
        helpers = [
            threading.Thread(target=self.stager.listen, args=(stop,), name="chronoq-tier-listen"),
            threading.Thread(target=self.stager.run, args=(stop,), name="chronoq-tier-stage"),
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
            self.stager.now.set()
            for helper in helpers:
                helper.join(timeout=5.0)
            with self.led.lock:
                self._step_down_all("stopped")
        if self.stager.failure is not None:
            raise self.stager.failure

    def run_once(self) -> None:
        """One turn of the mover: leadership when its time has come, then what is due."""
        now = self._monotonic()
        if now >= self._next_step:
            self._next_step = now + self.options.step_interval
            self._lead()
        with self.led.lock:
            if self.led.acting():
                self.mover.move_due()
                self.mover.trim_due()

    def stage_once(self) -> None:
        """One pass of the stager (see `Stager.stage_once`)."""
        self.stager.stage_once()

    def wake(self) -> None:
        self._wake.set()
        self.stager.now.set()

    def _until_next(self) -> float:
        moments = [self._next_step]
        with self.led.lock:
            deadline = self.led.wheel.next_deadline() if self.led.acting() else None
        if deadline is not None:
            moments.append(deadline)
        return max(0.0, min(moments) - self._monotonic())

    def _restage(self) -> None:
        self.stager.restage()

    # -- leadership -----------------------------------------------------------------------

    def _lead(self) -> None:
        granted = self.elector.step()
        with self.led.lock:
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
        part = Partition(lead.partition, lead.epoch, lead.trusted_until)
        part.fenced = not takeover.accepted
        self.partitions[lead.partition] = part
        self.stager.restage()  # stage its whole horizon at once
        self.events.emit(PartitionLeaderChanged(lead.partition, self.holder, lead.epoch))
        log.info(
            "leading partition %d (epoch %d)",
            lead.partition,
            lead.epoch,
            extra={"action": "tier.lead", "partition": lead.partition, "epoch": lead.epoch},
        )
        if part.fenced:
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
