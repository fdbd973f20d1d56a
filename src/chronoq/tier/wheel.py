"""A hierarchical timing wheel: when the next timer falls due, and which timers are due now.

A partition leader of the scale-out tier holds the next seconds of its partition's timers here,
so it sleeps until a bucket falls due instead of polling Redis, and then moves that whole bucket
at once. Adding and cancelling a timer cost O(1); expiring costs O(1) per timer that fires or
moves down a level, plus one step per non-empty bucket passed. No threads, no I/O: the clock is
injected (monotonic seconds by default), and `expire` also takes `now` from the caller. No locks
either: threads that share a wheel hold one lock around every call.

```python
wheel: TimingWheel[tuple[int, int]] = TimingWheel()  # 5 ms ticks on time.monotonic
wheel.add((job_id, token), deadline)                 # re-adding a key moves its timer
wheel.cancel((job_id, token))
while running:
    due = wheel.next_deadline()                      # None: nothing held
    woken.wait(None if due is None else max(0.0, due - time.monotonic()))
    for job_id, token in wheel.expire():             # every timer whose tick has ended
        ...
```

Deadlines are on the wheel's clock: a leader turns a job's `run_at` (database time) into one,
say `time.monotonic() + (run_at - database_now)`.

Ticks, and why a timer is never early
-------------------------------------
Time is counted in whole ticks (5 ms by default). A timer is keyed on the first tick boundary at
or after its deadline: its deadline rounded *up*. A bucket fires at the first `expire(now)` whose
`now` has reached its boundary, so a timer never fires before its deadline, and at most one tick
after it when the caller wakes at `next_deadline()`. (Kafka's wheel rounds down and can fire a
tick early: a claim checking `run_at <= now` then refuses the job.) The tick is the batch window:
every timer of one tick comes out in one `expire`.

Levels and the cascade
----------------------
Read a tick number in base `slots` (256 by default, 8 bits a digit). A timer sits at the level
of the highest digit in which its due tick differs from the wheel's current tick T, in the bucket
that digit names; its higher digits are T's:

```
  due tick, base 256:      [ d3 | d2 | d1 | d0 ]      d3 = t3, d2 > t2: level 2, bucket d2
  current tick T:          [ t3 | t2 | t1 | t0 ]

  level 0  ▕ ... │t0│ · │ · │ ... │255▕  1 tick a bucket, up to the end of T's level-1 span:
                                        fires when T reaches the bucket
  level 1  ▕ ... │t1│ · │ · │ ... │255▕  256 ticks a bucket  ─┐ cascade: when T enters a bucket's
  level 2  ▕ ... │t2│ · │ · │ ... │255▕  65,536 ticks        ─┤ span, its timers are placed again
  level 3  ▕ ... │t3│ · │ · │ ... │255▕  16,777,216 ticks    ─┘ one or more levels lower (or fire
  overflow { span number: bucket }      beyond the top level    if due at that very tick)
```

With the defaults, level 0 spans 1.28 s, level 1 5.5 min, level 2 23.3 h and level 3 248 days;
beyond that, timers wait in an overflow dict keyed by their top-level span, cascaded when T
enters that span. A timer moves at most `levels` times in its life. A timer's bucket is a
function of its due tick and T alone, so beside the buckets (key → due tick, read by a cascade
without another lookup) the wheel keeps one dict of key → due tick, from which `cancel` finds the
bucket again. Each level keeps a bitmask of its non-empty buckets, so the next one is the lowest
set bit above T's digit; a bucket emptied by cancels is cleared from the mask when next looked
at.

Float boundaries
----------------
Tick k's boundary is the float `k * tick`, and the rounding is checked against it both ways: a
timer is keyed on ceil(deadline / tick), one more when that boundary falls short of the deadline
in floats, and `expire(now)` goes to the last k whose boundary is at or before `now`. The
promise "never early" therefore holds exactly in floats, not just up to a rounding error. It
holds while tick numbers stay within ±2**52 (713,000 years at 5 ms), where consecutive
boundaries are about a tick apart: a deadline or a `now` beyond is refused.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from chronoq.errors import ConfigError

K = TypeVar("K", bound=Hashable)

# Within ±MAX_TICK, `k * tick` grows by about a tick with each k, so rounding to the boundary
# is exact; far beyond, consecutive floats are further apart than a tick.
MAX_TICK = 2**52
MAX_SLOTS = 2**16
MAX_LEVELS = 16

# (tick the event happens at, level, slot): a bucket firing (level 0) or cascading. The
# overflow is level `levels`, its slot the span number.
_Event = tuple[int, int, int]


class TimingWheel(Generic[K]):
    """Timers keyed by any hashable (a leader uses `(job_id, token)`), due at float deadlines
    on the clock's scale; see the module docstring for the design.

    - `add(key, deadline)`: a timer, or move an existing one. A deadline at or before the
      wheel's time (`now`, the latest `expire`) comes out at the next `expire`.
    - `cancel(key) -> bool`: forget the timer at once (False: no such timer).
    - `expire(now=None) -> list[key]`: the timers whose tick boundary `now` has reached, in
      tick order (a tick's timers in no particular order); each deadline is `<= now`.
    - `next_deadline() -> float | None`: when to call `expire` next: the boundary of the
      earliest timer's tick (at or after its deadline, less than a tick later), or `now` when
      a timer is already due; None when the wheel is empty. Never before `now`, so
      `expire(next_deadline())` is always allowed.

    Time only moves on: an `expire` before the wheel's `now` raises ValueError. Settings out of
    range raise ConfigError; a deadline that is no number raises TypeError, and one that is not
    finite or beyond the wheel's range ValueError, leaving the wheel as it was.
    """

    __slots__ = (
        "_bits",
        "_buckets",
        "_clock",
        "_current",
        "_due",
        "_earliest",
        "_levels",
        "_mask",
        "_now",
        "_occupied",
        "_origin",
        "_overflow",
        "_overflow_spans",
        "_ready",
        "_tick",
    )

    def __init__(
        self,
        tick: float = 0.005,
        slots: int = 256,
        levels: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tick = _checked_tick(tick)
        self._bits = _checked_slots(slots).bit_length() - 1
        self._levels = _checked_levels(levels)
        self._mask = slots - 1
        self._clock = clock
        # buckets[level][slot]: key → due tick of the timers waiting there
        self._buckets: list[list[dict[K, int]]] = [
            [{} for _ in range(slots)] for _ in range(levels)
        ]
        self._occupied = [0] * levels  # per level: bit s set when bucket s may hold timers
        self._overflow: dict[int, dict[K, int]] = {}  # top-level span number → its timers
        self._overflow_spans: list[int] = []  # a heap of the overflow's span numbers
        self._ready: dict[K, int] = {}  # timers added when already due: out at the next expire
        self._due: dict[K, int] = {}  # every timer's due tick, counted from `_origin`
        self._earliest: int | None = None  # the earliest due tick in the buckets (None: unknown)
        self._now = clock()
        # Ticks are counted from the wheel's start, so T and every bucketed due tick are >= 0.
        self._origin = self._floor_tick(self._now, "the clock's reading")
        self._current = 0  # T: every bucket up to this tick has fired

    # -- reading ---------------------------------------------------------------------------

    @property
    def tick(self) -> float:
        """Seconds a tick: the batch window, and the most a timer fires after its deadline
        when `expire` is called at `next_deadline()`."""
        return self._tick

    @property
    def slots(self) -> int:
        return self._mask + 1

    @property
    def levels(self) -> int:
        return self._levels

    @property
    def now(self) -> float:
        """The wheel's time: the latest `expire`'s now (the clock's reading when built)."""
        return self._now

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick={self._tick!r}, slots={self.slots}, levels={self._levels}, "
            f"timers={len(self._due)}, now={self._now!r})"
        )

    def next_deadline(self) -> float | None:
        """When to call `expire` next (on the clock's scale): the boundary of the earliest
        timer's tick, which is at or after its deadline and less than a tick later; `now`
        when a timer added already due is waiting; None when the wheel is empty."""
        if self._ready:
            return self._now
        if not self._due:
            return None
        earliest = self._earliest
        if earliest is None:
            earliest = self._earliest = self._earliest_bucketed()
        return (earliest + self._origin) * self._tick

    # -- changing --------------------------------------------------------------------------

    def add(self, key: K, deadline: float) -> None:
        """Add a timer due at `deadline`; a key already held moves to the new deadline."""
        due = self._ceil_tick(deadline) - self._origin
        known = self._due
        if key in known:
            self._unlink(key, known[key])
        known[key] = due
        if deadline <= self._now:
            self._ready[key] = due
            return
        self._place(key, due)
        earliest = self._earliest
        if earliest is not None and due < earliest:
            self._earliest = due

    def cancel(self, key: K) -> bool:
        """Forget the timer of `key` at once; False when there is none."""
        due = self._due.pop(key, None)
        if due is None:
            return False
        self._unlink(key, due)
        return True

    def expire(self, now: float | None = None) -> list[K]:
        """Take out every timer whose tick boundary `now` (default: the clock) has reached,
        in tick order. Each one's deadline is at or before `now`; none comes out twice."""
        now = self._clock() if now is None else now
        target = self._floor_tick(now) - self._origin
        if now < self._now:
            raise ValueError(
                f"expire(now={now!r}) goes back in time: the wheel is already at {self._now!r}"
            )
        self._now = now
        fired: list[K] = []
        if self._ready:
            self._fire(self._ready, fired)
            self._ready = {}
        while (event := self._next_event()) is not None and event[0] <= target:
            self._current, level, slot = event
            if level == 0:
                self._fire(self._take(level, slot), fired)
            else:
                self._cascade(self._take(level, slot), fired)
        # No bucket falls due before `target`: T may jump there, every timer stays in place.
        self._current = target
        if fired:
            # The first bucket left, found by the loop: at level 0 it is the earliest timer.
            self._earliest = event[0] if event is not None and event[1] == 0 else None
        return fired

    # -- ticks -----------------------------------------------------------------------------

    def _ceil_tick(self, deadline: float) -> int:
        """A tick whose boundary is at or after `deadline`, less than a tick past it (the
        first such, but for a float rounding)."""
        tick = self._tick
        try:
            k = math.ceil(deadline / tick)
        except (TypeError, ValueError, OverflowError):
            raise _refused("a timer's deadline", deadline, tick) from None
        if k * tick < deadline:  # the quotient rounded down onto a boundary short of it
            k += 1
        if not -MAX_TICK <= k <= MAX_TICK:
            raise _refused("a timer's deadline", deadline, tick)
        return k

    def _floor_tick(self, now: float, what: str = "now") -> int:
        """The last tick whose boundary is at or before `now`."""
        tick = self._tick
        try:
            k = math.floor(now / tick)
        except (TypeError, ValueError, OverflowError):
            raise _refused(what, now, tick) from None
        if (k + 1) * tick <= now:
            k += 1
        elif k * tick > now:
            k -= 1
        if not -MAX_TICK <= k <= MAX_TICK:
            raise _refused(what, now, tick)
        return k

    # -- buckets ---------------------------------------------------------------------------

    def _locate(self, due: int) -> tuple[int, int]:
        """The (level, slot) holding a timer due at `due` (> T); level `levels` is the overflow,
        its slot the top-level span number."""
        bits = self._bits
        level = ((due ^ self._current).bit_length() - 1) // bits
        if level >= self._levels:
            return self._levels, due >> (bits * self._levels)
        return level, (due >> (bits * level)) & self._mask

    def _place(self, key: K, due: int) -> None:
        level, slot = self._locate(due)
        if level == self._levels:
            self._overflow_bucket(slot)[key] = due
            return
        bucket = self._buckets[level][slot]
        if not bucket:
            self._occupied[level] |= 1 << slot
        bucket[key] = due

    def _overflow_bucket(self, span: int) -> dict[K, int]:
        bucket = self._overflow.get(span)
        if bucket is None:
            bucket = self._overflow[span] = {}
            heapq.heappush(self._overflow_spans, span)
        return bucket

    def _unlink(self, key: K, due: int) -> None:
        """Take a timer out of wherever it waits (its entry in `_due` is the caller's)."""
        ready = self._ready
        if ready and key in ready:
            del ready[key]
            return
        # `_locate` written out: a cancel is little more than this.
        bits = self._bits
        level = ((due ^ self._current).bit_length() - 1) // bits
        if level < self._levels:
            del self._buckets[level][(due >> (bits * level)) & self._mask][key]
        else:
            del self._overflow[due >> (bits * self._levels)][key]
        if due == self._earliest:
            self._earliest = None

    def _take(self, level: int, slot: int) -> dict[K, int]:
        """Empty a bucket that is due to fire or cascade, and return what it held."""
        if level == self._levels:
            heapq.heappop(self._overflow_spans)
            return self._overflow.pop(slot)
        row = self._buckets[level]
        bucket, row[slot] = row[slot], {}
        self._occupied[level] &= ~(1 << slot)
        return bucket

    def _fire(self, bucket: dict[K, int], fired: list[K]) -> None:
        fired.extend(bucket)
        due = self._due
        for key in bucket:
            del due[key]

    def _cascade(self, bucket: dict[K, int], fired: list[K]) -> None:
        """Place a bucket's timers again now that T has entered its span; those due at this
        very tick fire. `_place` written out: this loop is most of what expiring costs."""
        due_of, current = self._due, self._current
        bits, mask, buckets, occupied = self._bits, self._mask, self._buckets, self._occupied
        for key, due in bucket.items():
            if due == current:
                fired.append(key)
                del due_of[key]
                continue
            # The due tick shares T's digits above the cascading level: no overflow here.
            level = ((due ^ current).bit_length() - 1) // bits
            slot = (due >> (bits * level)) & mask
            target = buckets[level][slot]
            if not target:
                occupied[level] |= 1 << slot
            target[key] = due

    def _next_event(self) -> _Event | None:
        """The first bucket after T that holds a timer: level 0 before level 1 and so on, since
        each level only holds ticks past the span of the level below."""
        current, bits, mask, occupied = self._current, self._bits, self._mask, self._occupied
        shift = 0
        for level, row in enumerate(self._buckets):
            digit = (current >> shift) & mask
            above = occupied[level] >> (digit + 1)
            while above:
                slot = digit + (above & -above).bit_length()
                if row[slot]:
                    span = shift + bits
                    return ((current >> span) << span) | (slot << shift), level, slot
                occupied[level] &= ~(1 << slot)  # emptied by cancels
                above &= above - 1
            shift += bits
        return self._next_overflow()

    def _next_overflow(self) -> _Event | None:
        spans, top = self._overflow_spans, self._levels
        while spans:
            span = spans[0]
            if self._overflow[span]:
                return span << (self._bits * top), top, span
            heapq.heappop(spans)
            del self._overflow[span]
        return None

    def _earliest_bucketed(self) -> int:
        """The earliest due tick in the buckets: the first event's tick at level 0, else the
        least due tick in the bucket that cascades first (every later bucket is later)."""
        event = self._next_event()
        if event is None:
            raise AssertionError("a wheel holding timers has a next bucket")
        tick, level, slot = event
        if level == 0:
            return tick
        bucket = self._overflow[slot] if level == self._levels else self._buckets[level][slot]
        return min(bucket.values())


def _checked_tick(tick: float) -> float:
    if isinstance(tick, bool) or not isinstance(tick, int | float) or not 0 < tick < math.inf:
        raise ConfigError(f"a timing wheel's tick must be positive, finite seconds, got {tick!r}")
    return float(tick)


def _checked_slots(slots: int) -> int:
    if (
        isinstance(slots, bool)
        or not isinstance(slots, int)
        or not 2 <= slots <= MAX_SLOTS
        or slots & (slots - 1)
    ):
        raise ConfigError(
            f"a timing wheel's slots must be a power of two from 2 to {MAX_SLOTS}, got {slots!r}"
        )
    return slots


def _checked_levels(levels: int) -> int:
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
        raise ConfigError(
            f"a timing wheel's levels must be a whole number from 1 to {MAX_LEVELS}, got {levels!r}"
        )
    return levels


def _refused(what: str, value: object, tick: float) -> Exception:
    """The error for a time the wheel cannot take: not a number, not finite, or too far."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return TypeError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        return ValueError(f"{what} must be a finite number of seconds, got {value!r}")
    return ValueError(
        f"{what} {value!r} is beyond the wheel's range: at a tick of {tick!r} s it counts "
        f"ticks within ±2**52 (±{MAX_TICK * tick:.4g} s), where boundaries stay a tick apart"
    )
