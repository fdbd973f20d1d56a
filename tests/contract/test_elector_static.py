"""StaticElector's own helpers: tests move leadership with them, deterministically."""

from __future__ import annotations

import math

import pytest

from chronoq.coordination import PartitionLeader, StaticElector
from chronoq.errors import ConfigError


def epochs(elector: StaticElector) -> dict[int, int]:
    return {partition: lead.epoch for partition, lead in elector.step().items()}


def test_it_leads_every_partition_by_default_forever() -> None:
    elector = StaticElector("a", 3)
    assert epochs(elector) == {0: 1, 1: 1, 2: 1}
    assert all(lead.trusted_until == math.inf for lead in elector.step().values())


def test_it_leads_the_partitions_given_under_the_epoch_given() -> None:
    assert epochs(StaticElector("a", 4, led=[3, 1], epoch=7)) == {1: 7, 3: 7}
    assert StaticElector("a", 4, led=[]).step() == {}


def test_set_led_keeps_the_epochs_of_what_stays_and_starts_the_rest_higher() -> None:
    elector = StaticElector("a", 4, led=[0, 1])
    elector.set_led([1, 2])
    assert epochs(elector) == {1: 1, 2: 2}
    elector.set_led([0], epoch=10)
    assert epochs(elector) == {0: 10}


def test_bump_epoch_starts_a_new_term() -> None:
    elector = StaticElector("a", 3)
    assert elector.bump_epoch([2]) == 2
    assert epochs(elector) == {0: 1, 1: 1, 2: 2}
    assert elector.bump_epoch() == 3
    assert set(epochs(elector).values()) == {3}


def test_move_to_hands_partitions_over_under_an_epoch_above_both() -> None:
    a, b = StaticElector("a", 4, led=[0, 1, 2]), StaticElector("b", 4, led=[3], epoch=5)
    assert a.move_to(b, [0, 1]) == 6
    assert epochs(a) == {2: 1}
    assert epochs(b) == {0: 6, 1: 6, 3: 5}
    assert b.leaders() == [PartitionLeader(0, "b", 6), PartitionLeader(1, "b", 6),
                           PartitionLeader(3, "b", 5)]  # fmt: skip


def test_close_leads_nothing_and_leaves_the_members() -> None:
    elector = StaticElector("a", 2)
    assert elector.members() == ["a"]
    elector.close()
    assert elector.step() == {}
    assert elector.leaders() == []
    assert elector.members() == []
    with pytest.raises(RuntimeError, match="closed"):
        elector.set_led([0])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: StaticElector("a", 4, led=[4]), r"partitions \[4\] are out of range"),
        (lambda: StaticElector("a", 4, led=[-1]), "out of range"),
        (lambda: StaticElector("a", 4, epoch=0), "epoch"),
        (lambda: StaticElector("a", 0), "partitions"),
        (lambda: StaticElector("a", 4).set_led([9]), "out of range"),
        (lambda: StaticElector("a", 4).set_led(["1"]), "whole numbers"),  # type: ignore[list-item]
    ],
)
def test_bad_input_is_a_config_error_naming_it(build: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()  # type: ignore[operator]


def test_moving_or_bumping_what_it_does_not_lead_is_refused() -> None:
    a, b = StaticElector("a", 4, led=[0]), StaticElector("b", 4, led=[])
    with pytest.raises(ValueError, match=r"does not lead partitions \[1\]"):
        a.move_to(b, [1])
    with pytest.raises(ValueError, match=r"does not lead partitions \[2\]"):
        a.bump_epoch([2])
    with pytest.raises(ValueError, match="itself"):
        a.move_to(a, [0])
