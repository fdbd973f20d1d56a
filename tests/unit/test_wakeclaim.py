"""WakeClaim alone: a claim is made by the waking thread only while the loop waits with room,
at most once per wait, and the loop gets it back (answer or failure) when it closes the wait."""

from __future__ import annotations

import pytest

from chronoq.errors import StoreUnavailable
from chronoq.worker.source import Taken
from chronoq.worker.wakeclaim import WakeClaim


class Source:
    def __init__(self, error: Exception | None = None) -> None:
        self.limits: list[int] = []
        self.error = error

    def take(self, limit: int) -> Taken:
        self.limits.append(limit)
        if self.error is not None:
            raise self.error
        return Taken([], due_in=1.0)


def test_no_claim_is_made_unless_the_loop_waits_with_room() -> None:
    source = Source()
    claim = WakeClaim(source.take)
    claim.make()
    claim.open(0, held=3)
    claim.make()
    assert source.limits == []
    assert claim.close() is None


def test_one_claim_a_wait_for_the_room_the_loop_gave() -> None:
    source = Source()
    claim = WakeClaim(source.take)
    claim.open(7, held=2)
    assert claim.waiting
    claim.make()
    assert not claim.waiting
    assert source.limits == [7]
    made = claim.close()
    assert made is not None
    assert not made.woken_after
    claimed = made.claimed.result()
    assert (claimed.wanted, claimed.held_when_sent) == (7, 2)
    assert claimed.taken == Taken([], due_in=1.0)
    assert claimed.sent <= claimed.answered
    assert claim.close() is None


def test_a_closed_wait_takes_no_claim() -> None:
    source = Source()
    claim = WakeClaim(source.take)
    claim.open(5, held=0)
    assert claim.close() is None
    claim.make()
    assert source.limits == []


def test_a_failed_claim_reaches_the_loop() -> None:
    claim = WakeClaim(Source(StoreUnavailable("database gone")).take)
    claim.open(1, held=0)
    claim.make()
    made = claim.close()
    assert made is not None
    with pytest.raises(StoreUnavailable, match="database gone"):
        made.claimed.result()


def test_a_wake_up_after_the_claim_left_is_reported_with_it() -> None:
    # The second wake-up's signal reaches the loop together with the claim's own: without
    # this the loop would clear both and wait out its pause beside the jobs it announced.
    source = Source()
    claim = WakeClaim(source.take)
    claim.open(7, held=0)
    claim.make()
    claim.make()
    assert source.limits == [7]
    made = claim.close()
    assert made is not None and made.woken_after
    claim.open(7, held=0)
    claim.make()
    made = claim.close()
    assert made is not None and not made.woken_after, "a new wait starts unwoken"


def test_a_wake_up_while_the_loop_is_not_waiting_is_not_reported() -> None:
    source = Source()
    claim = WakeClaim(source.take)
    claim.make()  # the loop is busy: its own wake-up event carries this one
    claim.open(7, held=0)
    claim.make()
    made = claim.close()
    assert made is not None and not made.woken_after
