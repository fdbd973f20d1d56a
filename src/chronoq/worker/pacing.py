"""When to claim, and how much: pure code with an injected clock.

The claim loop asks the pacer how many jobs to ask its source for, tells it how long claims
and handlers take, and after each claim asks how long to wait before the next. Nothing here
does I/O, so every rule is tested alone (tests/unit/test_pacing.py), as the rate limiter is.

Rules:
- **Free slots.** A claim takes at most the free handler slots, plus a buffer of one batch
  while handlers are quicker than a claim round trip, but never more than `concurrency`
  results waiting to be reported (when the store is slow to take results, claiming stops
  instead of piling up leases). The buffer lets the next claim travel while the current
  batch runs. It is kept only for quick handlers: a buffered job waits about one handler's
  duration for its slot, no longer than it would have waited for its own claim.
- **A full claim** means more may be due: claim again at once while slots are free, else when
  a handler returns.
- **The source has more at once** (`ready`: it just rescued expired leases): claim again.
- **A claim that left a due row behind** (the source says `contended`): most often it fell
  due between the claim and the look at what is next, so claim again at once; if it is still
  there after that, another worker holds its lock, so back off a little, doubling, up to
  50 ms, and two workers do not spin on each other's rows.
- **Otherwise** wait until the source expects the next job, at most `poll_interval` (a
  wake-up cuts any wait short); in burst mode, stop once nothing is held.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from chronoq.worker.source import Taken

CONTENDED_BACKOFF_START = 0.001
CONTENDED_BACKOFF_CAP = 0.05


class MovingAverage:
    """An exponentially weighted mean of recent durations (unknown until the first one)."""

    __slots__ = ("value",)
    WEIGHT = 0.1

    def __init__(self) -> None:
        self.value: float | None = None

    def add(self, seconds: float) -> None:
        self.value = (
            seconds if self.value is None else self.value + self.WEIGHT * (seconds - self.value)
        )

    def below(self, other: MovingAverage) -> bool:
        return self.value is not None and other.value is not None and self.value < other.value


@dataclass(frozen=True, slots=True)
class Pause:
    """How long to wait before the next claim round (None: a burst is over), and whether the
    round found nothing more to do for now (`idle`)."""

    seconds: float | None
    idle: bool = False


class ClaimPacer:
    """Pacing of one worker's claims. `clock` is monotonic seconds."""

    def __init__(
        self,
        concurrency: int,
        batch_size: int,
        poll_interval: float,
        *,
        burst: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.poll_interval = poll_interval
        self.burst = burst
        self.clock = clock
        self.handler_seconds = MovingAverage()
        self.claim_seconds = MovingAverage()
        # Consecutive claims that left a due row behind.
        self.contended = 0

    def free_slots(self, running: int, buffered: int, held: int) -> int:
        """How many jobs a claim may take now (see the module's rules)."""
        ahead = self.batch_size if self.handler_seconds.below(self.claim_seconds) else 0
        concurrency = self.concurrency
        return min(concurrency - running - buffered + ahead, 2 * concurrency - held)

    def wanted(self, free: int) -> int:
        return min(free, self.batch_size)

    def claim_took(self, seconds: float) -> None:
        self.claim_seconds.add(seconds)

    def handler_took(self, seconds: float) -> None:
        self.handler_seconds.add(seconds)

    def no_slot(self) -> Pause:
        """No slot is free: a handler returning or a report wakes the loop before this."""
        return Pause(self.poll_interval)

    def after_full_claim(self, free_now: int) -> Pause:
        self.contended = 0
        return Pause(0.0) if free_now > 0 else self.no_slot()

    def after_partial_claim(self, taken: Taken, holding: int, sent: float) -> Pause:
        """After a claim, sent at `sent` (a reading of `clock`), that got fewer jobs than
        asked for. The time since it was sent is already spent: this errs towards waking
        early, never late."""
        pause = self._partial_pause(taken, holding)
        if pause.seconds is None:
            return pause
        return Pause(max(0.0, pause.seconds - (self.clock() - sent)), pause.idle)

    def _partial_pause(self, taken: Taken, holding: int) -> Pause:
        if taken.ready:
            return Pause(0.0)
        if taken.contended:
            self.contended = 0 if taken.jobs else self.contended + 1
            if self.contended <= 1:
                return Pause(0.0)
            return Pause(min(CONTENDED_BACKOFF_CAP, CONTENDED_BACKOFF_START * 2**self.contended))
        self.contended = 0
        if self.burst and not holding:
            return Pause(None, idle=True)
        due_in = taken.due_in
        wait = self.poll_interval if due_in is None else min(due_in, self.poll_interval)
        return Pause(wait, idle=True)
