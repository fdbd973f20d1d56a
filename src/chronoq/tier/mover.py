"""The partition leader's mover: due timers from Redis onto the streams, and stream trims.

```
 wheel.expire(now) ─► keys due, by partition ─► TimerStore.move_due(p, epoch, now) ─► streams
                        │ partition led but not     │ a whole batch: again, up to
                        │ trusted right now: its    │   move_batches_per_turn, then the
                        │ keys wait a step          │   next turn goes on
                                                    │ timers left: the wheel fires the earliest
                                                    │ lost / stale: Led.lost / Led.refused
 every trim_interval, per partition: trim the streams, and move whatever is due (a sweep: a
 timer staged but never moved, by this leader or a predecessor, moves within one interval)
```

It runs on the leader's own thread, under `Led.lock`, only for partitions it may act for; a
turn re-checks the trust window between batches, so a leader never writes past it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from chronoq.errors import ChronoqError
from chronoq.observability.events import TimersMoved
from chronoq.tier.partitions import NEXT_IN_REDIS, Led, Partition
from chronoq.tier.ports import Moved, PartitionLost, StaleEpoch

if TYPE_CHECKING:
    from chronoq.tier.options import TierOptions

log = logging.getLogger("chronoq.tier")

Key = tuple[int, int, int]


class Mover:
    """Moves what is due in the partitions `led` holds, and trims their streams."""

    def __init__(self, led: Led, options: TierOptions, monotonic: Callable[[], float]) -> None:
        self.led = led
        self.options = options
        self._monotonic = monotonic

    def move_due(self) -> None:
        expired = self.led.wheel.expire()
        if not expired:
            return
        due: dict[int, list[Key]] = {}
        for key in expired:
            due.setdefault(key[0], []).append(key)
        now = self._monotonic()
        for number, keys in due.items():
            part = self.led.partitions.get(number)
            if part is None or not self.led.still_leads(part):
                continue  # given up: its next leader stages and moves them
            if self.led.may_act(part, now):
                self._move_partition(part, keys)
            else:
                # Led, but not trusted this instant (a slow step, a lost Redis): the timers
                # are still in Redis, so they wait for the next step rather than vanish.
                self._again_at(keys, now + self.options.step_interval)

    def _move_partition(self, part: Partition, keys: list[Key]) -> None:
        led = self.led
        if not led.clock.known:
            # Not one staging read answered yet, so "now" on the database clock is unknown.
            self._again_at(keys, self._monotonic() + self.options.step_interval)
            return
        known = [led.known[k[1]] for k in keys if k[1] in led.known]
        earliest = min((k.due_ms for k in known), default=None)
        now_ms = led.clock.now_ms()
        for _ in range(self.options.move_batches_per_turn):
            if not led.may_act(part):
                self._again_at(keys, self._monotonic() + self.options.step_interval)
                return
            now_ms = led.clock.now_ms()
            try:
                moved = led.timers.move_due(
                    part.number, part.epoch, now_ms, self.options.move_batch
                )
            except ChronoqError as exc:
                log.warning("cannot move partition %d: %s", part.number, exc)
                self._again_at(keys, self._monotonic() + min(1.0, self.options.stage_interval))
                return
            if not self._moved(part, moved, earliest, now_ms):
                return
            if moved.moved < self.options.move_batch:
                self._settle(part, keys, now_ms, moved.next_due_ms)
                return
        # Still full batches: yield to the other partitions and to leadership, go on next turn.
        led.expect_in_redis(part, now_ms)

    def _moved(self, part: Partition, moved: Moved, earliest: int | None, now_ms: int) -> bool:
        """Account for one move; False when Redis refused it."""
        if moved.lost:
            self.led.lost(part)
            return False
        if moved.stale:
            self.led.refused(part, "stale")
            return False
        if moved.moved:
            self.led.moved(moved.entries, self._monotonic())
            late = 0.0 if earliest is None else max(0, now_ms - earliest) / 1000
            self.led.events.emit(TimersMoved(part.number, moved.moved, late))
        return True

    def _settle(self, part: Partition, keys: list[Key], now_ms: int, next_ms: int | None) -> None:
        """Nothing due is left in Redis up to now_ms: a due key the move did not report was
        moved earlier (a reply lost to a timeout, say); one not due yet on the database clock
        fired early against a newer estimate of it and waits again."""
        led = self.led
        now = self._monotonic()
        for key in keys:
            known = led.known.get(key[1])
            if known is None or known.token != key[2] or known.moved_at is not None:
                continue
            if known.due_ms <= now_ms:
                known.moved_at = now
            else:
                led.wheel.add(key, led.clock.deadline(known.due_ms))
        if next_ms is not None:
            led.expect_in_redis(part, next_ms)

    def _again_at(self, keys: list[Key], at: float) -> None:
        for key in keys:
            self.led.wheel.add(key, at)

    def trim_due(self) -> None:
        now = self._monotonic()
        for part in self.led.acting():
            if now < part.next_trim:
                continue
            part.next_trim = now + self.options.trim_interval
            # The sweep: move whatever is due now, then again when the earliest falls due.
            part.next_in_redis_ms = 0
            self.led.wheel.add((part.number, NEXT_IN_REDIS, 0), now)
            try:
                self.led.timers.trim(part.number, part.epoch)
            except StaleEpoch:
                self.led.refused(part, "stale")
            except PartitionLost:
                self.led.lost(part)
            except ChronoqError as exc:
                log.debug("trim of partition %d skipped: %s", part.number, exc)
