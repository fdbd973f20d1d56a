"""The timing wheel held against a heapq model, driven at random.

Rules add timers (in the past, within a tick, on each level of the wheel and past its top level,
on tick boundaries), cancel them, add a held key again (which moves it), and expire at random
later times, by the clock or at exactly `next_deadline()`. The model is a heap of timers with
lazy deletion, as a heap-based timer queue would keep them. After every step:

- a timer fires only when its deadline is at or before `now` (never early), and only once;
- a cancelled or moved timer never fires at its old deadline, and `cancel` says whether a timer
  was there;
- none is lost: a timer fires at the first expire past its tick's boundary, at most one tick
  after its deadline (a timer added already due, at the next expire);
- `next_deadline()` is never before the earliest pending deadline (a wake-up there would find
  nothing due), at most a tick after it, and an expire at it fires the earliest timer.

Where the tick and every instant are binary fractions ("exact" shapes), the model knows each
timer's boundary exactly (with `Fraction`s) and must agree with the wheel timer for timer and in
order. A 5 ms tick has no exact float: there the model checks the bounds, allowing the rounding
of a float boundary (a few ulps), and never early stays exact.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from chronoq.tier.wheel import TimingWheel

Key = tuple[int, int]  # (job id, token), as a leader keys its timers
KEYS = st.sampled_from([(job, token) for job in range(6) for token in (1, 2)])
Release = Fraction | float  # when the model says a timer must be out; -inf: at the next expire


@dataclass(frozen=True)
class Shape:
    """A wheel's settings and the scale of the times thrown at it."""

    name: str
    tick: float
    slots: int
    levels: int
    start: float
    exact: bool  # tick, start and every offset are binary fractions: boundaries are exact

    def level_spans(self) -> list[float]:
        """Seconds covered by level 0, 1, ...: past the last, timers wait in the overflow."""
        return [self.tick * self.slots ** (level + 1) for level in range(self.levels)]

    def offsets(self) -> st.SearchStrategy[float]:
        """Seconds from now: the past, within a tick, on each level, and in the overflow."""
        spans = self.level_spans()
        ranges = [(-spans[0], 0.0), (0.0, self.tick), *((0.0, s) for s in spans)]
        ranges.append((spans[-1], spans[-1] * 8))
        return st.one_of(*(self._between(low, high) for low, high in ranges))

    def advances(self) -> st.SearchStrategy[float]:
        """Seconds to move time on: not at all, within a tick, across levels, far."""
        spans = self.level_spans()
        ranges = [(0.0, self.tick), *((0.0, s) for s in spans), (0.0, spans[-1] * 8)]
        return st.one_of(st.just(0.0), *(self._between(low, high) for low, high in ranges))

    def _between(self, low: float, high: float) -> st.SearchStrategy[float]:
        if not self.exact:
            return st.floats(low, high, allow_nan=False, allow_infinity=False)
        unit = self.tick / 16  # a power of two: sums of units and the start stay exact
        return st.integers(math.floor(low / unit), math.ceil(high / unit)).map(lambda n: n * unit)


SHAPES = [
    # 8 slots, 3 levels of 1/64 s ticks: level 0 spans 0.125 s, level 1 1 s, level 2 8 s.
    Shape("small", tick=2**-6, slots=8, levels=3, start=3.0, exact=True),
    # Two slots and one level: everything past two ticks waits in the overflow.
    Shape("overflow", tick=1.0, slots=2, levels=1, start=-7.5, exact=True),
    Shape("wide", tick=2**-8, slots=256, levels=2, start=1000.5, exact=True),
    # The defaults, on a clock some hours into its life: 5 ms is no binary fraction.
    Shape("default", tick=0.005, slots=256, levels=4, start=12_345.678, exact=False),
    Shape("millisecond", tick=0.001, slots=16, levels=3, start=0.0, exact=False),
]


@dataclass(frozen=True)
class ModelTimer:
    deadline: float
    ready: bool  # added at or before the wheel's time: due at the next expire
    seq: int  # which add this is: older heap entries of the key are stale


class HeapModel:
    """The reference: a heap of (release, seq, key) with lazy deletion for cancels and moves.

    Exact shapes release a timer at its deadline rounded up to the tick, in exact arithmetic;
    the others at its deadline, and then it must be out within a tick (and a few ulps)."""

    def __init__(self, tick: float, exact: bool) -> None:
        self.tick, self.exact = tick, exact
        self.heap: list[tuple[Release, int, Key]] = []
        self.live: dict[Key, ModelTimer] = {}
        self.seq = 0

    def add(self, key: Key, deadline: float, wheel_now: float) -> None:
        self.seq += 1
        ready = deadline <= wheel_now
        self.live[key] = ModelTimer(deadline, ready, self.seq)
        heapq.heappush(self.heap, (self.release(deadline, ready), self.seq, key))

    def cancel(self, key: Key) -> bool:
        return self.live.pop(key, None) is not None

    def release(self, deadline: float, ready: bool = False) -> Release:
        if ready:
            return -math.inf
        if not self.exact:
            return deadline
        tick = Fraction(self.tick)
        return math.ceil(Fraction(deadline) / tick) * tick

    def must_be_out(self, release: Release, deadline: float, now: float) -> bool:
        if self.exact or release == -math.inf:
            return release <= now
        return deadline + self.tick + slack(deadline) <= now

    def expired(self, now: float, fired: list[Key]) -> None:
        """Check what one `expire(now)` gave against the model, and take it out."""
        assert len(set(fired)) == len(fired), f"a timer fired twice in one expire: {fired}"
        for key in fired:
            timer = self.live.get(key)
            assert timer is not None, f"{key} fired but was cancelled, moved or fired before"
            assert timer.deadline <= now, f"{key} due at {timer.deadline!r} fired early at {now!r}"
            if self.exact:
                assert self.release(timer.deadline, timer.ready) <= now
        if self.exact:
            releases = [self.release(self.live[k].deadline, self.live[k].ready) for k in fired]
            assert releases == sorted(releases), "timers came out of tick order"
        self._check_due_ones_fired(now, set(fired))
        for key in fired:
            del self.live[key]

    def _check_due_ones_fired(self, now: float, fired: set[Key]) -> None:
        heap = self.heap
        while heap:
            release, seq, key = heap[0]
            timer = self.live.get(key)
            if timer is None or timer.seq != seq:
                heapq.heappop(heap)  # cancelled, moved or fired: a stale entry
                continue
            if not self.must_be_out(release, timer.deadline, now):
                return
            heapq.heappop(heap)
            assert key in fired, f"{key} due at {timer.deadline!r} was still held at {now!r}"

    def earliest(self) -> tuple[Release, Key] | None:
        """The live timer at the top of the heap, stale entries dropped."""
        while self.heap:
            release, seq, key = self.heap[0]
            timer = self.live.get(key)
            if timer is not None and timer.seq == seq:
                return release, key
            heapq.heappop(self.heap)
        return None


def slack(instant: float) -> float:
    """How far a float boundary k * tick may stray: a few ulps of the instants involved."""
    return 4 * math.ulp(abs(instant) + 1.0)


class WheelAgainstHeap(RuleBasedStateMachine):
    shape: ClassVar[Shape]

    def __init__(self) -> None:
        super().__init__()
        shape = self.shape
        self.now = shape.start
        self.wheel: TimingWheel[Key] = TimingWheel(
            shape.tick, shape.slots, shape.levels, clock=lambda: self.now
        )
        self.model = HeapModel(shape.tick, shape.exact)

    # -- rules -------------------------------------------------------------------------------

    @rule(key=KEYS, offset=st.data())
    def add(self, key: Key, offset: st.DataObject) -> None:
        self._add(key, self.now + offset.draw(self.shape.offsets(), label="offset"))

    @rule(key=KEYS, ticks=st.integers(-4, 600))
    def add_on_a_boundary(self, key: Key, ticks: int) -> None:
        tick = self.shape.tick
        self._add(key, (math.floor(self.now / tick) + ticks) * tick)

    @rule(key=KEYS)
    def cancel(self, key: Key) -> None:
        assert self.wheel.cancel(key) is self.model.cancel(key)
        assert key not in self.wheel

    @rule(advance=st.data(), by_clock=st.booleans())
    def expire(self, advance: st.DataObject, by_clock: bool) -> None:
        self.now += advance.draw(self.shape.advances(), label="advance")
        fired = self.wheel.expire() if by_clock else self.wheel.expire(self.now)
        self.model.expired(self.now, fired)

    @precondition(lambda self: self.model.live)
    @rule()
    def expire_at_next_deadline(self) -> None:
        self._wake_at_next_deadline()

    # -- after every step ------------------------------------------------------------------

    @invariant()
    def holds_the_same_timers(self) -> None:
        assert len(self.wheel) == len(self.model.live)
        assert all(key in self.wheel for key in self.model.live)

    @invariant()
    def next_deadline_is_the_earliest_timers_tick(self) -> None:
        due = self.wheel.next_deadline()
        top = self.model.earliest()
        if top is None:
            assert due is None
            return
        assert due is not None
        release, key = top
        if release == -math.inf:  # a timer added already due: wake at once
            assert due == self.wheel.now
            return
        earliest = self.model.live[key].deadline
        assert earliest <= due, f"wakes at {due!r} before the earliest deadline {earliest!r}"
        if self.shape.exact:
            assert due == release
        else:
            assert due <= earliest + self.shape.tick + slack(earliest)

    def teardown(self) -> None:
        """None lost: waking at each next deadline empties the wheel, one tick at a time."""
        for _ in range(len(self.model.live)):
            if not self.model.live:
                break
            self._wake_at_next_deadline()
        assert len(self.wheel) == 0 and not self.model.live

    # -- helpers -----------------------------------------------------------------------------

    def _add(self, key: Key, deadline: float) -> None:
        self.wheel.add(key, deadline)
        self.model.add(key, deadline, self.wheel.now)
        assert key in self.wheel

    def _wake_at_next_deadline(self) -> None:
        """Expire at exactly `next_deadline()`: the earliest timer fires, at most a tick late."""
        due = self.wheel.next_deadline()
        top = self.model.earliest()
        assert due is not None and top is not None
        assert due >= self.wheel.now, "next_deadline is before the wheel's own time"
        self.now = due
        fired = self.wheel.expire(due)
        assert top[1] in fired, f"the earliest timer {top[1]} did not fire at its deadline"
        for key in fired:
            timer = self.model.live[key]
            if not timer.ready:
                lateness = due - timer.deadline
                assert lateness <= self.shape.tick + slack(due), f"{key} {lateness!r} s late"
        self.model.expired(due, fired)


MACHINE = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_the_wheel_fires_what_the_heap_fires(shape: Shape) -> None:
    machine = type(f"WheelAgainstHeap_{shape.name}", (WheelAgainstHeap,), {"shape": shape})
    run_state_machine_as_test(machine, settings=MACHINE)


# -- many timers at once -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_a_crowd_of_timers_each_fires_once_within_a_tick(shape: Shape) -> None:
    """Hundreds of timers share buckets and cascade together (the stateful test holds a dozen):
    woken at each next deadline, every one fires once, never early, at most a tick late."""

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        offsets=st.lists(shape.offsets(), min_size=1, max_size=300),
        cancelled=st.sets(st.integers(0, 299), max_size=100),
    )
    def crowd(offsets: list[float], cancelled: set[int]) -> None:
        now = shape.start
        wheel: TimingWheel[Hashable] = TimingWheel(
            shape.tick, shape.slots, shape.levels, clock=lambda: now
        )
        deadlines = {n: now + offset for n, offset in enumerate(offsets)}
        for n, deadline in deadlines.items():
            wheel.add(n, deadline)
        for n in cancelled:
            assert wheel.cancel(n) is (n in deadlines)
        pending = {n: d for n, d in deadlines.items() if n not in cancelled}
        while (due := wheel.next_deadline()) is not None:
            fired = wheel.expire(due)
            assert fired, f"woken at {due!r} for nothing"
            for n in fired:
                deadline = pending.pop(n)
                assert deadline <= due
                assert deadline <= now or due - deadline <= shape.tick + slack(due)
        assert not pending, f"never fired: {sorted(pending)[:10]}"

    crowd()
