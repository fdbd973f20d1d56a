"""The timing wheel's edge cases, one at a time: an empty wheel, timers in the past, exact tick
boundaries, huge deadlines, cancels and moves, and the errors for what it cannot take.

Ticks of a quarter second or 1/64 s keep every boundary an exact float, so a test can name the
instant a bucket falls due; the default 5 ms tick is tested where rounding matters."""

from __future__ import annotations

import math
from typing import Any

import pytest

from chronoq.errors import ConfigError
from chronoq.tier.wheel import MAX_TICK, TimingWheel

QUARTER = 0.25


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wheel(
    tick: float = QUARTER, slots: int = 4, levels: int = 2, now: float = 0.0
) -> TimingWheel[Any]:
    """A small wheel: with 4 slots and 2 levels, level 0 spans 1 s, level 1 4 s, and any
    timer past the next 4 s boundary waits in the overflow."""
    return TimingWheel(tick=tick, slots=slots, levels=levels, clock=ManualClock(now))


def drain(timers: TimingWheel[Any]) -> list[tuple[float, list[Any]]]:
    """Expire at each next deadline until the wheel is empty: (when, what fired)."""
    woken = []
    while (when := timers.next_deadline()) is not None:
        woken.append((when, timers.expire(when)))
    return woken


# -- an empty wheel ----------------------------------------------------------------------------


def test_an_empty_wheel_has_nothing_to_do() -> None:
    timers = wheel()
    assert len(timers) == 0
    assert timers.next_deadline() is None
    assert timers.expire(100.0) == []
    assert timers.now == 100.0
    assert ("job", 1) not in timers


def test_the_wheel_starts_at_the_clocks_time_and_expires_on_it_by_default() -> None:
    clock = ManualClock(50.0)
    timers: TimingWheel[str] = TimingWheel(tick=QUARTER, clock=clock)
    assert timers.now == 50.0
    timers.add("a", 51.0)
    clock.now = 50.75
    assert timers.expire() == []
    clock.now = 51.0
    assert timers.expire() == ["a"]
    assert timers.now == 51.0


# -- when a timer fires ------------------------------------------------------------------------


def test_a_deadline_on_a_boundary_fires_at_that_instant_and_not_before() -> None:
    timers = wheel()
    timers.add("a", 1.5)
    assert timers.next_deadline() == 1.5
    assert timers.expire(math.nextafter(1.5, 0.0)) == []
    assert timers.expire(1.5) == ["a"]
    assert len(timers) == 0


def test_a_deadline_between_boundaries_waits_for_the_next_one() -> None:
    """Whole buckets: a timer due at 1.1 s is in the bucket of 1.25 s, so at 1.2 s (past its
    deadline, before its boundary) it waits; it is never early, and at most a tick late."""
    timers = wheel()
    timers.add("a", 1.1)
    assert timers.next_deadline() == 1.25
    assert timers.expire(1.2) == []
    assert timers.expire(1.25) == ["a"]


@pytest.mark.parametrize("deadline", [0.3, 0.7, 1.0, 2.675, 1234.565, 1e-9, 86400.005])
def test_a_tick_with_no_exact_float_never_fires_a_timer_early(deadline: float) -> None:
    """5 ms is no binary fraction: each boundary is rounded, and still never short of a
    deadline it holds."""
    timers = TimingWheel(tick=0.005, clock=ManualClock(0.0))
    timers.add("a", deadline)
    due = timers.next_deadline()
    assert due is not None and deadline <= due < deadline + 0.005
    assert timers.expire(math.nextafter(deadline, 0.0)) == []
    assert timers.expire(due) == ["a"]


@pytest.mark.parametrize(
    "deadline", [0.015000000000000001, 0.030000000000000002, 1922262.9400000002]
)
def test_a_deadline_just_past_a_rounded_quotient_is_not_fired_at_that_boundary(
    deadline: float,
) -> None:
    """deadline / 0.005 rounds to a whole number whose boundary is one ulp short of the
    deadline: the timer belongs to the next tick."""
    timers = TimingWheel(tick=0.005, clock=ManualClock(0.0))
    timers.add("a", deadline)
    short = math.nextafter(deadline, 0.0)
    assert math.ceil(deadline / 0.005) * 0.005 == short  # the trap is really there
    assert timers.expire(short) == []
    assert timers.expire(deadline + 0.005) == ["a"]


@pytest.mark.parametrize("ticks", [35, 41, 69])
def test_now_just_short_of_a_boundary_does_not_reach_it(ticks: int) -> None:
    """0.175 / 0.005 is 35.0, yet 35 * 0.005 is 0.17500000000000002: at 0.175 the bucket of
    that boundary has not fallen due."""
    boundary = ticks * 0.005
    now = math.nextafter(boundary, 0.0)
    assert math.floor(now / 0.005) == ticks  # the trap is really there
    timers = TimingWheel(tick=0.005, clock=ManualClock(0.0))
    timers.add("a", boundary)
    assert timers.expire(now) == []
    assert timers.expire(boundary) == ["a"]


@pytest.mark.parametrize("now", [0.145, 0.29, 0.58])
def test_now_on_a_boundary_whose_quotient_rounds_down_reaches_it(now: float) -> None:
    """0.145 / 0.005 is just under 29, yet 29 * 0.005 is 0.145: the bucket is due then."""
    assert math.floor(now / 0.005) * 0.005 < now  # the trap is really there
    timers = TimingWheel(tick=0.005, clock=ManualClock(0.0))
    timers.add("a", now)
    assert timers.next_deadline() == now
    assert timers.expire(now) == ["a"]


def test_timers_come_out_in_tick_order_across_levels() -> None:
    timers = wheel()
    deadlines = {"overflow": 9.0, "level 1": 2.5, "level 0": 0.5, "next tick": 0.25, "far": 40.0}
    for key, deadline in deadlines.items():
        timers.add(key, deadline)
    assert timers.expire(100.0) == ["next tick", "level 0", "level 1", "overflow", "far"]


def test_each_timer_fires_at_its_own_boundary_when_woken_by_next_deadline() -> None:
    """Deadlines on every level of a small wheel, and past its top level: each wake-up is at
    one timer's tick and fires exactly it."""
    timers = wheel(tick=1.0, slots=4, levels=2)  # level 0: 4 ticks, level 1: 16, then overflow
    for n in range(1, 41):
        timers.add(n, float(n))
    assert drain(timers) == [(float(n), [n]) for n in range(1, 41)]


def test_a_bucket_of_many_timers_fires_at_once() -> None:
    timers = TimingWheel(clock=ManualClock(0.0))
    for n in range(1000):
        timers.add(n, 30.0)
    [(when, fired)] = drain(timers)
    assert when == 30.0
    assert sorted(fired) == list(range(1000))


def test_a_long_silence_is_crossed_in_one_expire() -> None:
    """Nothing walks the empty ticks between: a day at 5 ms is 17 million of them."""
    timers = TimingWheel(clock=ManualClock(0.0))
    timers.add("tomorrow", 86_400.0)
    timers.add("later", 86_400.0 * 3)
    assert timers.expire(86_399.0) == []
    assert timers.expire(86_400.0) == ["tomorrow"]
    assert timers.next_deadline() == pytest.approx(86_400.0 * 3)


# -- timers in the past ----------------------------------------------------------------------


def test_a_timer_added_in_the_past_comes_out_at_the_next_expire() -> None:
    timers = wheel(now=10.0)
    timers.add("late", 3.0)
    timers.add("just now", 10.0)
    assert timers.next_deadline() == 10.0  # the wheel's time: due already
    assert sorted(timers.expire(10.0)) == ["just now", "late"]


def test_a_timer_due_between_the_last_expire_and_its_boundary_comes_out_next() -> None:
    """At 10.1 s the wheel has seen time pass 10.05 s, so a timer due then is due already,
    though its tick ends at 10.25 s."""
    timers = wheel()
    timers.expire(10.1)
    timers.add("a", 10.05)
    assert timers.expire(10.1) == ["a"]


def test_a_deadline_before_the_wheels_start_is_due() -> None:
    timers = wheel(now=-5.0)
    timers.add("negative", -1e12)
    assert timers.next_deadline() == -5.0
    assert timers.expire(-5.0) == ["negative"]


# -- huge deadlines ----------------------------------------------------------------------------


def test_a_deadline_years_away_waits_in_the_overflow_and_still_fires_on_time() -> None:
    timers = TimingWheel(clock=ManualClock(0.0))  # the top level spans 248 days
    year = 365.25 * 86_400
    timers.add("in ten years", 10 * year)
    timers.add("in a second", 1.0)
    assert timers.expire(1.0) == ["in a second"]
    due = timers.next_deadline()
    assert due is not None and 10 * year <= due < 10 * year + 0.005
    assert timers.expire(math.nextafter(10 * year, 0.0)) == []
    assert timers.expire(due) == ["in ten years"]


def test_the_last_deadline_in_range_works_and_the_next_is_refused() -> None:
    timers = wheel(tick=1.0)
    timers.add("edge", float(MAX_TICK))
    assert timers.next_deadline() == float(MAX_TICK)
    with pytest.raises(ValueError, match="beyond the wheel's range"):
        timers.add("past it", float(MAX_TICK) * 2)
    with pytest.raises(ValueError, match="beyond the wheel's range"):
        timers.add("far past it", 1e300)
    assert timers.expire(float(MAX_TICK)) == ["edge"]


# -- cancel ------------------------------------------------------------------------------------


def test_cancel_of_an_unknown_key_says_so() -> None:
    timers = wheel()
    assert timers.cancel("nobody") is False
    timers.add("a", 1.0)
    assert timers.cancel("a") is True
    assert timers.cancel("a") is False


@pytest.mark.parametrize("deadline", [-1.0, 0.5, 2.5, 9.0, 1e6])
def test_a_cancelled_timer_is_gone_at_once_and_never_fires(deadline: float) -> None:
    """In the past, on level 0, on level 1 and in the overflow."""
    timers = wheel()
    timers.add(("job", 7), deadline)
    timers.add(("job", 8), deadline)
    assert timers.cancel(("job", 7)) is True
    assert ("job", 7) not in timers and len(timers) == 1
    assert timers.expire(2e6) == [("job", 8)]


def test_cancelling_the_earliest_timer_moves_the_next_deadline_on() -> None:
    timers = wheel()
    timers.add("first", 0.5)
    timers.add("second", 2.5)
    assert timers.next_deadline() == 0.5
    timers.cancel("first")
    assert timers.next_deadline() == 2.5
    timers.cancel("second")
    assert timers.next_deadline() is None


def test_a_bucket_emptied_by_cancels_is_passed_over() -> None:
    timers = wheel()
    for n in range(5):
        timers.add(n, 0.5)
    timers.add("after", 0.75)
    for n in range(5):
        timers.cancel(n)
    assert timers.next_deadline() == 0.75
    assert timers.expire(0.75) == ["after"]


# -- re-adding moves a timer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "then"),
    [(5.0, 1.0), (1.0, 5.0), (-3.0, 2.5), (2.5, -3.0), (1e6, 0.25), (0.25, 1e6), (0.5, 0.5)],
)
def test_re_adding_a_key_moves_its_timer(first: float, then: float) -> None:
    timers = wheel()
    timers.add("a", first)
    timers.add("a", then)
    assert len(timers) == 1
    assert drain(timers) == [(max(then, 0.0), ["a"])]  # once, at the new deadline only


# -- keys --------------------------------------------------------------------------------------


def test_keys_are_any_hashable_such_as_a_job_and_its_token() -> None:
    timers: TimingWheel[tuple[int, int]] = wheel()
    timers.add((42, 1), 1.0)
    timers.add((42, 2), 1.0)  # another attempt of the same job: another timer
    assert (42, 1) in timers and (42, 3) not in timers
    assert sorted(timers.expire(1.0)) == [(42, 1), (42, 2)]


def test_repr_names_the_settings_and_the_count() -> None:
    timers = wheel()
    timers.add("a", 1.0)
    assert repr(timers) == "TimingWheel(tick=0.25, slots=4, levels=2, timers=1, now=0.0)"
    assert (timers.tick, timers.slots, timers.levels) == (0.25, 4, 2)


# -- what the wheel refuses --------------------------------------------------------------------


@pytest.mark.parametrize("tick", [0, -0.005, math.inf, math.nan, "5ms", True])
def test_a_bad_tick_is_refused(tick: object) -> None:
    with pytest.raises(ConfigError, match="tick must be positive, finite seconds"):
        TimingWheel(tick=tick)  # type: ignore[arg-type]


@pytest.mark.parametrize("slots", [0, 1, 3, 100, 2**17, 256.0, True])
def test_slots_must_be_a_power_of_two(slots: object) -> None:
    with pytest.raises(ConfigError, match="slots must be a power of two"):
        TimingWheel(slots=slots)  # type: ignore[arg-type]


@pytest.mark.parametrize("levels", [0, -1, 17, 2.0])
def test_levels_must_be_a_small_whole_number(levels: object) -> None:
    with pytest.raises(ConfigError, match="levels must be a whole number"):
        TimingWheel(levels=levels)  # type: ignore[arg-type]


@pytest.mark.parametrize("deadline", [math.nan, math.inf, -math.inf])
def test_a_deadline_that_is_not_finite_is_refused(deadline: float) -> None:
    timers = wheel()
    with pytest.raises(ValueError, match="deadline must be a finite number of seconds"):
        timers.add("a", deadline)
    assert len(timers) == 0


def test_a_deadline_that_is_not_a_number_is_refused_and_the_old_timer_stays() -> None:
    timers = wheel()
    timers.add("a", 1.0)
    with pytest.raises(TypeError, match="deadline must be a number of seconds, got '1s'"):
        timers.add("a", "1s")  # type: ignore[arg-type]
    assert timers.expire(1.0) == ["a"]


def test_time_never_goes_back() -> None:
    timers = wheel()
    timers.expire(5.0)
    with pytest.raises(ValueError, match=r"goes back in time: the wheel is already at 5\.0"):
        timers.expire(4.0)


@pytest.mark.parametrize("now", [math.nan, math.inf, 1e300])
def test_an_impossible_now_is_refused(now: float) -> None:
    with pytest.raises(ValueError, match="now"):
        wheel().expire(now)


def test_a_clock_that_reads_nonsense_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="the clock's reading must be a finite number"):
        TimingWheel(clock=lambda: math.nan)
