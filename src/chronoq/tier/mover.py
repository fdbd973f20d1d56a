"""The partition leader's mover: due timers from Redis onto the streams, and stream trims.

```
 wheel.expire(now) ─► keys due, by partition ─► TimerStore.move_due(p, epoch, now) ─► streams
                                                  │ moved a whole batch: again
                                                  │ timers left: the wheel fires the earliest
                                                  │ lost / stale: Led.lost / Led.refused
```

It runs on the leader's own thread, under `Led.lock`, only for partitions it may act for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from chronoq.errors import ChronoqError
from chronoq.observability.events import TimersMoved
from chronoq.tier.partitions import Led, Partition
from chronoq.tier.ports import PartitionLost, StaleEpoch

if TYPE_CHECKING:
    from chronoq.tier.options import TierOptions

log = logging.getLogger("chronoq.tier")


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
        due: dict[int, list[tuple[int, int, int]]] = {}
        for key in expired:
            due.setdefault(key[0], []).append(key)
        acting = {p.number: p for p in self.led.acting()}
        for number, keys in due.items():
            part = acting.get(number)
            if part is not None:
                self._move_partition(part, keys)

    def _move_partition(self, part: Partition, keys: list[tuple[int, int, int]]) -> None:
        led = self.led
        earliest = min((led.known[k[1]].due_ms for k in keys if k[1] in led.known), default=None)
        now = self._monotonic()
        while True:
            now_ms = led.clock.now_ms()
            try:
                moved = led.timers.move_due(
                    part.number, part.epoch, now_ms, self.options.move_batch
                )
            except ChronoqError as exc:
                log.warning("cannot move partition %d: %s", part.number, exc)
                self._retry_soon(keys)
                return
            if moved.lost:
                led.lost(part)
                return
            if moved.stale:
                led.refused(part, "stale")
                return
            if moved.moved:
                late = 0.0 if earliest is None else max(0, now_ms - earliest) / 1000
                led.events.emit(TimersMoved(part.number, moved.moved, late))
            if moved.moved < self.options.move_batch:
                break
        for _, job_id, token in keys:
            known = led.known.get(job_id)
            if known is not None and known.token == token:
                known.moved_at = now
        if moved.next_due_ms is not None:
            led.expect_in_redis(part, moved.next_due_ms)

    def _retry_soon(self, keys: list[tuple[int, int, int]]) -> None:
        """Redis did not answer: the wheel fires these again in a moment."""
        again = self._monotonic() + min(1.0, self.options.stage_interval)
        for key in keys:
            self.led.wheel.add(key, again)

    def trim_due(self) -> None:
        now = self._monotonic()
        for part in self.led.acting():
            if now < part.next_trim:
                continue
            part.next_trim = now + self.options.trim_interval
            try:
                self.led.timers.trim(part.number, part.epoch)
            except StaleEpoch:
                self.led.refused(part, "stale")
            except (PartitionLost, ChronoqError) as exc:
                log.debug("trim of partition %d skipped: %s", part.number, exc)
