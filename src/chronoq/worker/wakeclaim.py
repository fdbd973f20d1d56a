"""The claim a waiting worker leaves to the thread that wakes it.

A worker whose last claim came back short waits for its source's signal (a NOTIFY, SQLite's
change counter, a stream's entries) or the end of its pause. When the signal comes, the thread
that received it would wake the event loop, which would hand the claim to an I/O thread, which
would send it: two hand-offs between threads before the claim leaves, each a wake-up of a
sleeping thread, which on an idle machine is what a job's pickup mostly waits on. Instead, the
loop opens a `WakeClaim` before it waits, saying how many jobs it has room for, and the waking
thread sends that claim itself, at once, then wakes the loop; the loop takes the claim's answer
as if it had made the claim.

```
  loop:    open(wanted) ── wait ─────────────────── close() ─► the claim made, if any
  waker:                        make(): take(wanted) ┘ (at most once per wait)
```

Every step is under one lock, so a claim is made by the waker or by the loop, never by both:
once `close` has run, `make` does nothing, and a claim `make` started is returned by `close`
even while its round trip is still out (the loop then awaits it).

A wake-up that comes after the claim left (a second NOTIFY, more stream entries) may announce
jobs the claim did not see. Its signal reaches the loop with the claim's own, before the loop
has taken the claim, so the loop cannot tell the two apart by its wake-up event alone: `close`
says so (`woken_after`), and the loop looks again instead of waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from chronoq.worker.source import Taken


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claim's answer and its circumstances: how many jobs it asked for, when it was sent
    and answered (monotonic seconds), and how many jobs the worker held when it was sent."""

    taken: Taken
    wanted: int
    sent: float
    answered: float
    held_when_sent: int


def claim(take: Callable[[int], Taken], wanted: int, held: int) -> Claimed:
    """Claim up to `wanted` jobs through `take` (blocking), timed, for a worker holding `held`:
    the one way a claim is sent, by an I/O thread or by a waking thread."""
    sent = time.monotonic()
    taken = take(wanted)
    return Claimed(taken, wanted, sent, time.monotonic(), held)


@dataclass(frozen=True, slots=True)
class MadeClaim:
    """The claim a waking thread made (done or still out), and whether another wake-up came
    after it was sent."""

    claimed: Future[Claimed]
    woken_after: bool


class WakeClaim:
    """A claim of up to `wanted` jobs that the thread waking a waiting worker makes through
    `take` (the source's `take`), on the worker's behalf. Thread-safe."""

    def __init__(self, take: Callable[[int], Taken]) -> None:
        self._take = take
        self._lock = threading.Lock()
        self._wanted = 0
        self._held = 0
        self._made: Future[Claimed] | None = None
        self._woken_after = False

    @property
    def waiting(self) -> bool:
        """The loop waits with room, and no claim was made for it yet."""
        with self._lock:
            return self._wanted > 0

    def open(self, wanted: int, held: int) -> None:
        """The loop is about to wait with room for `wanted` jobs, holding `held`."""
        with self._lock:
            self._wanted = wanted
            self._held = held
            self._made = None
            self._woken_after = False

    def make(self) -> None:
        """On the waking thread: claim now if the loop waits with room, once per wait. Blocks
        this thread for the claim's round trip; a failure is the loop's to handle."""
        with self._lock:
            wanted, held = self._wanted, self._held
            if wanted <= 0:
                # Not waiting, or the claim already left: news after it, for the loop.
                self._woken_after = self._made is not None
                return
            self._wanted = 0
            made = self._made = Future()
            made.set_running_or_notify_cancel()  # the loop can no longer cancel it
        try:
            made.set_result(claim(self._take, wanted, held))
        except Exception as exc:
            made.set_exception(exc)

    def close(self) -> MadeClaim | None:
        """The loop woke (or its pause ended): no claim may start now. Returns the claim the
        waker made during the wait, done or still out, if it made one."""
        with self._lock:
            self._wanted = 0
            made, self._made = self._made, None
            woken_after, self._woken_after = self._woken_after, False
        return None if made is None else MadeClaim(made, woken_after)
