"""The `PartitionElector` contract, run on every elector: etcd (a real 3-member cluster) and static.

What each must do: lead partitions (every one, when alone), report them in `leaders()` and
itself in `members()`, give every leadership a trust window that has not ended, grow epochs
across a change of leader, and release everything at `close()`.

Electors differ in how leadership changes hands (etcd: the old leader closes and the new one
campaigns; static: a test moves it), so each has a small kit that knows how.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Protocol

import pytest

from chronoq.coordination import (
    Leadership,
    PartitionElector,
    PartitionLeader,
    StaticElector,
)
from chronoq.errors import ConfigError
from chronoq.tier.etcd import EtcdElector
from tests.helpers import wait_until
from tests.services.etcd import EtcdCluster

PARTITIONS = 8
TTL = 2.0
DEADLINE = 20.0


class Kit(Protocol):
    def leader(self, holder: str, partitions: int = PARTITIONS) -> PartitionElector:
        """An elector that leads every partition once it is the only one."""
        ...

    def standby(self, holder: str) -> PartitionElector:
        """An elector beside a leader, waiting for it to go."""
        ...

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        """Make `new` the leader of what `old` leads, and `old` gone."""
        ...

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        """The leaders as a status page would read them after `elector` is closed."""
        ...


class EtcdKit:
    def __init__(self, cluster: EtcdCluster, prefix: str) -> None:
        self._endpoints = cluster.endpoints
        self._prefix = prefix
        self.opened: list[EtcdElector] = []

    def leader(self, holder: str, partitions: int = PARTITIONS) -> EtcdElector:
        elector = EtcdElector(self._endpoints, holder, partitions, ttl=TTL, prefix=self._prefix)
        self.opened.append(elector)
        return elector

    def standby(self, holder: str) -> EtcdElector:
        return self.leader(holder)

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        old.close()

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        return self.leader("observer").leaders()  # never stepped: it reads and holds nothing


class StaticKit:
    def leader(self, holder: str, partitions: int = PARTITIONS) -> StaticElector:
        return StaticElector(holder, partitions)

    def standby(self, holder: str) -> StaticElector:
        return StaticElector(holder, PARTITIONS, led=[])

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        assert isinstance(old, StaticElector) and isinstance(new, StaticElector)
        old.move_to(new, old.epochs)
        old.close()

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        return elector.leaders()


@pytest.fixture(params=["etcd", "static"])
def kit(request: pytest.FixtureRequest) -> Iterator[Kit]:
    if request.param == "static":
        yield StaticKit()
        return
    cluster = request.getfixturevalue("etcd_cluster")
    etcd_kit = EtcdKit(cluster, request.getfixturevalue("etcd_prefix"))
    yield etcd_kit
    for elector in etcd_kit.opened:
        elector.close()


def settle(*electors: PartitionElector) -> list[dict[int, Leadership]]:
    """Step every elector until each leads its share and two rounds agree; the last round."""
    rounds: list[list[dict[int, Leadership]]] = []

    def stable() -> bool:
        rounds.append([elector.step() for elector in electors])
        if len(rounds) < 2:
            return False
        last, before = rounds[-1], rounds[-2]
        epochs = [{p: lead.epoch for p, lead in led.items()} for led in last]
        same = epochs == [{p: lead.epoch for p, lead in led.items()} for led in before]
        return same and sum(len(led) for led in last) == electors[0].partitions

    wait_until(stable, timeout=DEADLINE, what="the electors to settle")
    return rounds[-1]


def epochs_of(led: dict[int, Leadership]) -> dict[int, int]:
    return {partition: lead.epoch for partition, lead in led.items()}


def test_a_lone_elector_leads_every_partition(kit: Kit) -> None:
    elector = kit.leader("a")
    (led,) = settle(elector)
    assert sorted(led) == list(range(PARTITIONS))
    for partition, lead in led.items():
        assert lead.partition == partition
        assert lead.epoch >= 1
        assert lead.trusted_until > time.monotonic()


def test_leaders_and_members_report_what_step_returns(kit: Kit) -> None:
    elector = kit.leader("a")
    (led,) = settle(elector)
    expected = [PartitionLeader(p, "a", led[p].epoch) for p in sorted(led)]
    assert elector.leaders() == expected
    assert elector.members() == ["a"]


def test_close_releases_every_partition(kit: Kit) -> None:
    elector = kit.leader("a")
    settle(elector)
    elector.close()
    assert elector.step() == {}
    assert [leader for leader in kit.observed_leaders(elector) if leader.holder == "a"] == []
    elector.close()  # a second close is harmless


def test_epochs_grow_across_a_change_of_leader(kit: Kit) -> None:
    old, new = kit.leader("a"), kit.standby("b")
    (before, _) = settle(old, new)
    kit.hand_over(old, new)
    (after,) = settle(new)
    assert sorted(after) == list(range(PARTITIONS))
    grown = {p: (before[p].epoch, after[p].epoch) for p in before}
    assert all(new_epoch > old_epoch for old_epoch, new_epoch in grown.values()), grown


def test_the_new_leader_is_reported(kit: Kit) -> None:
    old, new = kit.leader("a"), kit.standby("b")
    settle(old, new)
    kit.hand_over(old, new)
    (after,) = settle(new)
    assert new.leaders() == [PartitionLeader(p, "b", after[p].epoch) for p in sorted(after)]


def test_two_electors_never_both_lead_a_partition(kit: Kit) -> None:
    electors: Sequence[PartitionElector] = (kit.leader("a"), kit.standby("b"))
    first, second = settle(*electors)
    assert not set(first) & set(second)
    assert set(first) | set(second) == set(range(PARTITIONS))


@pytest.mark.parametrize("partitions", [0, -1])
def test_a_partition_count_below_one_is_a_config_error(kit: Kit, partitions: int) -> None:
    with pytest.raises(ConfigError, match="partitions"):
        kit.leader("a", partitions)
