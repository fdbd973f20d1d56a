"""Claim pacing without a store or a loop: free slots, claiming ahead, and when to look again."""

from __future__ import annotations

import pytest

from chronoq.core.jobs import Job
from chronoq.worker.pacing import (
    CONTENDED_BACKOFF_CAP,
    ClaimPacer,
    MovingAverage,
    Pause,
)
from chronoq.worker.source import Taken


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pacer(
    concurrency: int = 4, batch: int = 4, poll: float = 5.0, *, burst: bool = False
) -> tuple[ClaimPacer, Clock]:
    clock = Clock()
    return ClaimPacer(concurrency, batch, poll, burst=burst, clock=clock), clock


def quick_handlers(p: ClaimPacer) -> None:
    """As measured after quick jobs: handlers return long before a claim comes back."""
    p.handler_took(0.0001)
    p.claim_took(0.01)


JOB = object()


def some_jobs(n: int) -> list[Job]:
    return [JOB] * n  # type: ignore[list-item]  # the pacer only counts them


def test_a_moving_average_is_unknown_until_the_first_duration() -> None:
    average, other = MovingAverage(), MovingAverage()
    assert average.value is None and not average.below(other)
    average.add(1.0)
    assert average.value == 1.0
    average.add(2.0)
    assert average.value == pytest.approx(1.1)
    assert not average.below(other)  # still nothing to compare with
    other.add(5.0)
    assert average.below(other) and not other.below(average)


def test_without_timings_a_claim_takes_only_the_free_slots() -> None:
    p, _ = pacer(concurrency=4)
    assert p.free_slots(running=0, buffered=0, held=0) == 4
    assert p.free_slots(running=3, buffered=0, held=3) == 1
    assert p.free_slots(running=4, buffered=0, held=4) == 0


def test_quick_handlers_get_one_batch_ahead() -> None:
    p, _ = pacer(concurrency=4, batch=4)
    quick_handlers(p)
    assert p.free_slots(running=4, buffered=0, held=4) == 4
    assert p.free_slots(running=4, buffered=4, held=8) == 0


def test_slow_handlers_get_no_batch_ahead() -> None:
    p, _ = pacer(concurrency=4, batch=4)
    p.handler_took(2.0)
    p.claim_took(0.01)
    assert p.free_slots(running=4, buffered=0, held=4) == 0


def test_results_waiting_to_be_reported_cap_the_claims() -> None:
    """Held counts finished attempts not yet reported: at twice the concurrency, no more."""
    p, _ = pacer(concurrency=4, batch=4)
    quick_handlers(p)
    assert p.free_slots(running=0, buffered=0, held=8) == 0
    assert p.free_slots(running=0, buffered=0, held=6) == 2


def test_a_claim_asks_for_at_most_one_batch() -> None:
    p, _ = pacer(concurrency=10, batch=3)
    assert p.wanted(10) == 3 and p.wanted(2) == 2


def test_a_full_claim_goes_again_at_once_while_slots_are_free() -> None:
    p, _ = pacer(poll=5.0)
    assert p.after_full_claim(free_now=1) == Pause(0.0)
    assert p.after_full_claim(free_now=0) == Pause(5.0)


def test_a_short_claim_waits_until_the_next_job_is_due_and_counts_the_time_spent() -> None:
    p, clock = pacer(poll=5.0)
    sent = clock.now
    clock.now += 0.25
    assert p.after_partial_claim(Taken([], due_in=2.0), 0, sent) == Pause(1.75, idle=True)


def test_the_wait_is_at_most_the_poll_interval() -> None:
    p, clock = pacer(poll=5.0)
    assert p.after_partial_claim(Taken([], due_in=60.0), 0, clock.now) == Pause(5.0, idle=True)
    assert p.after_partial_claim(Taken([], due_in=None), 0, clock.now) == Pause(5.0, idle=True)


def test_a_claim_that_took_longer_than_the_wait_goes_again_at_once() -> None:
    p, clock = pacer()
    sent = clock.now
    clock.now += 3.0
    assert p.after_partial_claim(Taken([], due_in=1.0), 0, sent) == Pause(0.0, idle=True)


def test_a_source_with_more_at_once_is_asked_again_at_once_without_idling() -> None:
    p, clock = pacer()
    assert p.after_partial_claim(Taken([], ready=True), 0, clock.now) == Pause(0.0)


def test_a_due_row_left_behind_is_claimed_again_once_then_backed_off_doubling() -> None:
    p, clock = pacer()
    contended = Taken([], due_in=0.0, contended=True)
    pauses = [p.after_partial_claim(contended, 0, clock.now).seconds for _ in range(8)]
    assert pauses[0] == 0.0
    assert pauses[1:4] == [0.004, 0.008, 0.016]
    assert pauses[-1] == CONTENDED_BACKOFF_CAP
    assert all(not p.after_partial_claim(contended, 0, clock.now).idle for _ in range(2))


def test_a_contended_claim_that_got_jobs_resets_the_backoff() -> None:
    p, clock = pacer()
    contended = Taken([], due_in=0.0, contended=True)
    for _ in range(5):
        p.after_partial_claim(contended, 0, clock.now)
    got_some = Taken(some_jobs(1), due_in=0.0, contended=True)
    assert p.after_partial_claim(got_some, 1, clock.now) == Pause(0.0)
    assert p.after_partial_claim(contended, 1, clock.now) == Pause(0.0)


def test_an_idle_round_resets_the_backoff() -> None:
    p, clock = pacer()
    contended = Taken([], due_in=0.0, contended=True)
    for _ in range(5):
        p.after_partial_claim(contended, 0, clock.now)
    p.after_partial_claim(Taken([], due_in=1.0), 0, clock.now)
    assert p.after_partial_claim(contended, 0, clock.now) == Pause(0.0)


def test_a_burst_ends_when_nothing_is_due_and_nothing_is_held() -> None:
    p, clock = pacer(burst=True)
    assert p.after_partial_claim(Taken([], due_in=1.0), 0, clock.now) == Pause(None, idle=True)
    held = p.after_partial_claim(Taken([], due_in=1.0), 2, clock.now)
    assert held == Pause(1.0, idle=True)


def test_no_free_slot_waits_for_a_wake_up_within_the_poll_interval() -> None:
    p, _ = pacer(poll=2.0)
    assert p.no_slot() == Pause(2.0)
