"""The `PartitionElector` contract, run on every elector: PostgreSQL, SQLite, etcd (a real
3-member cluster) and static.

What each must do: lead partitions (every one, when alone), keep their epochs while it renews,
report them in `leaders()` and itself in `members()`, give every leadership a trust window that
ends before its lease could (half the ttl), grow epochs across a change of leader (resigned or
vanished), never let two electors lead one partition, and release everything at `close()`.

Electors differ in how leadership changes hands (the stores and etcd: the old leader closes, or
stops renewing, and the new one campaigns; static: a test moves it), so each has a small kit
that knows how. What only the stores do (named duties, rows, a session that dies) is at the end.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

import psycopg
import pytest

from chronoq.coordination import (
    Leadership,
    PartitionElector,
    PartitionLeader,
    StaticElector,
)
from chronoq.coordination.postgres import PostgresElector
from chronoq.errors import ConfigError
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore
from chronoq.tier.etcd import EtcdElector
from tests.helpers import wait_until
from tests.services.etcd import EtcdCluster

from .support import Store

PARTITIONS = 8
TTL = 2.0
DEADLINE = 20.0
ADAPTERS = ["postgres", "sqlite", "etcd", "static"]
STORE_FIXTURES = {"postgres": "pg_store", "sqlite": "sqlite_store"}


class Kit(Protocol):
    ttl: float | None  # of a lease or a lock row; None: trust never ends (static)

    def leader(self, holder: str, partitions: int = PARTITIONS) -> PartitionElector:
        """An elector that leads every partition once it is the only one."""
        ...

    def standby(self, holder: str, partitions: int = PARTITIONS) -> PartitionElector:
        """An elector beside a leader, waiting for it to go."""
        ...

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        """Make `new` the leader of what `old` leads, and `old` gone (it resigned)."""
        ...

    def vanish(self, old: PartitionElector, new: PartitionElector) -> None:
        """`old` stops without resigning, as a process that died; `new` is to take over."""
        ...

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        """The leaders as a status page would read them (static: as `elector` says)."""
        ...


class StoreKit:
    """PostgreSQL or SQLite: electors of one duty on the test's store."""

    ttl = TTL

    def __init__(self, store: Store) -> None:
        self._store = store
        self.opened: list[PartitionElector] = []

    def leader(self, holder: str, partitions: int = PARTITIONS) -> PartitionElector:
        elector = self._store.elector("duty", holder, TTL, partitions)
        self.opened.append(elector)
        return elector

    def standby(self, holder: str, partitions: int = PARTITIONS) -> PartitionElector:
        return self.leader(holder, partitions)

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        old.close()

    def vanish(self, old: PartitionElector, new: PartitionElector) -> None:
        # PostgreSQL: the lock's session ends with its connection. SQLite: the rows expire a
        # ttl after the last step.
        if isinstance(old, PostgresElector):
            sever(old)

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        return self.leader("observer").leaders()  # never stepped: it reads and holds nothing


class EtcdKit:
    ttl = TTL

    def __init__(self, cluster: EtcdCluster, prefix: str) -> None:
        self._endpoints = cluster.endpoints
        self._prefix = prefix
        self.opened: list[PartitionElector] = []

    def leader(self, holder: str, partitions: int = PARTITIONS) -> EtcdElector:
        elector = EtcdElector(self._endpoints, holder, partitions, ttl=TTL, prefix=self._prefix)
        self.opened.append(elector)
        return elector

    def standby(self, holder: str, partitions: int = PARTITIONS) -> EtcdElector:
        return self.leader(holder, partitions)

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        old.close()

    def vanish(self, old: PartitionElector, new: PartitionElector) -> None:
        pass  # it is never stepped again: its lease, and its keys, expire a ttl later

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        return self.leader("observer").leaders()  # never stepped: it reads and holds nothing


class StaticKit:
    ttl = None

    def leader(self, holder: str, partitions: int = PARTITIONS) -> StaticElector:
        return StaticElector(holder, partitions)

    def standby(self, holder: str, partitions: int = PARTITIONS) -> StaticElector:
        return StaticElector(holder, partitions, led=[])

    def hand_over(self, old: PartitionElector, new: PartitionElector) -> None:
        self.vanish(old, new)
        old.close()

    def vanish(self, old: PartitionElector, new: PartitionElector) -> None:
        assert isinstance(old, StaticElector) and isinstance(new, StaticElector)
        old.move_to(new, old.epochs)

    def observed_leaders(self, elector: PartitionElector) -> list[PartitionLeader]:
        return elector.leaders()


@pytest.fixture(params=ADAPTERS)
def kit(request: pytest.FixtureRequest) -> Iterator[Kit]:
    if request.param == "static":
        yield StaticKit()
        return
    opened: StoreKit | EtcdKit
    if request.param == "etcd":
        cluster = request.getfixturevalue("etcd_cluster")
        opened = EtcdKit(cluster, request.getfixturevalue("etcd_prefix"))
    else:
        opened = StoreKit(request.getfixturevalue(STORE_FIXTURES[request.param]))
    yield opened
    for elector in opened.opened:
        elector.close()


def settle(*electors: PartitionElector) -> list[dict[int, Leadership]]:
    """Step every elector until each leads its share and two rounds agree; the last round."""
    rounds: list[list[dict[int, Leadership]]] = []

    def stable() -> bool:
        rounds.append([elector.step() for elector in electors])
        if len(rounds) < 2:
            return False
        last, before = rounds[-1], rounds[-2]
        same = [epochs_of(led) for led in last] == [epochs_of(led) for led in before]
        return same and sum(len(led) for led in last) == electors[0].partitions

    wait_until(stable, timeout=DEADLINE, what="the electors to settle")
    return rounds[-1]


def epochs_of(led: dict[int, Leadership]) -> dict[int, int]:
    return {partition: lead.epoch for partition, lead in led.items()}


def who(leaders: Sequence[PartitionLeader]) -> list[tuple[int, str, int]]:
    """What every status page shows of a leader, whatever else an elector records."""
    return [(leader.partition, leader.holder, leader.epoch) for leader in leaders]


def sever(elector: PostgresElector) -> None:
    """End the elector's session from the server's side, as a restart or a network cut does."""
    conn = elector._conn
    assert conn is not None, "the elector has no session yet"
    pid = conn.info.backend_pid
    with psycopg.connect(elector._dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


# -- the contract ---------------------------------------------------------------------------


def test_a_lone_elector_leads_every_partition(kit: Kit) -> None:
    elector = kit.leader("a")
    (led,) = settle(elector)
    assert sorted(led) == list(range(PARTITIONS))
    for partition, lead in led.items():
        assert lead.partition == partition
        assert lead.epoch >= 1
        assert lead.trusted_until > time.monotonic()


def test_renewing_keeps_the_epochs(kit: Kit) -> None:
    elector = kit.leader("a")
    (led,) = settle(elector)
    assert epochs_of(elector.step()) == epochs_of(led)


def test_trust_ends_by_half_the_ttl(kit: Kit) -> None:
    """A leader stops acting before anyone else can be elected: the lease or row lives a ttl
    after the step was sent, the trust half of it."""
    elector = kit.leader("a")
    settle(elector)
    led = elector.step()
    returned = time.monotonic()
    for lead in led.values():
        if kit.ttl is None:
            assert lead.trusted_until == math.inf
        else:
            assert returned < lead.trusted_until <= returned + kit.ttl / 2


def test_leaders_and_members_report_what_step_returns(kit: Kit) -> None:
    elector = kit.leader("a")
    (led,) = settle(elector)
    assert who(elector.leaders()) == [(p, "a", led[p].epoch) for p in sorted(led)]
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


def test_a_leader_that_vanishes_is_replaced_under_higher_epochs(kit: Kit) -> None:
    old, new = kit.leader("a", 1), kit.standby("b", 1)
    (before, _) = settle(old, new)
    kit.vanish(old, new)
    (after,) = settle(new)
    assert after[0].epoch > before[0].epoch


def test_the_new_leader_is_reported(kit: Kit) -> None:
    old, new = kit.leader("a"), kit.standby("b")
    settle(old, new)
    kit.hand_over(old, new)
    (after,) = settle(new)
    assert who(new.leaders()) == [(p, "b", after[p].epoch) for p in sorted(after)]


def test_two_electors_never_both_lead_a_partition(kit: Kit) -> None:
    electors: Sequence[PartitionElector] = (kit.leader("a"), kit.standby("b"))
    first, second = settle(*electors)
    assert not set(first) & set(second)
    assert set(first) | set(second) == set(range(PARTITIONS))


def test_one_partition_has_one_leader_and_a_standby(kit: Kit) -> None:
    """The scheduler's shape: a duty of one partition."""
    leader, standby = kit.leader("a", 1), kit.standby("b", 1)
    led, waiting = settle(leader, standby)
    assert sorted(led) == [0]
    assert waiting == {}
    assert who(kit.observed_leaders(leader)) == [(0, "a", led[0].epoch)]


@pytest.mark.parametrize("partitions", [0, -1])
def test_a_partition_count_below_one_is_a_config_error(kit: Kit, partitions: int) -> None:
    with pytest.raises(ConfigError, match="partitions"):
        kit.leader("a", partitions)


# -- what only the stores do ----------------------------------------------------------------


def test_duties_are_elected_separately(store: Store) -> None:
    one = store.elector("cron", "a", TTL)
    two = store.elector("other", "b", TTL)
    try:
        assert sorted(one.step()) == [0]
        assert sorted(two.step()) == [0]
    finally:
        one.close()
        two.close()


def test_the_rows_record_each_term(store: Store) -> None:
    """Partition 0's row keeps the duty's own name (`store.leader_get`, and older releases,
    read it); the times of a term are the database's."""
    elector = store.elector("duty", "a", TTL, partitions=2)
    try:
        led = elector.step()
        before = store.db_now()
        leaders = elector.leaders()
        assert who(leaders) == [(0, "a", led[0].epoch), (1, "a", led[1].epoch)]
        for leader in leaders:
            assert leader.elected_at is not None and leader.renewed_at is not None
            assert leader.expires_at is not None and leader.expires_at > before
        held = store.leader_get("duty")
        assert held is not None and (held.holder, held.term) == ("a", led[0].epoch)
    finally:
        elector.close()


def test_a_successor_keeps_its_row_when_the_vanished_leader_closes(store: Store) -> None:
    """Resigning is by (holder, term): the old leader's close touches only its own terms."""
    old, new = store.elector("duty", "a", TTL), store.elector("duty", "b", TTL)
    try:
        settle(old, new)
        if isinstance(old, PostgresElector):
            sever(old)
        after = wait_until(new.step, timeout=DEADLINE, what="the standby to take over")
        old.close()
        assert who(new.leaders()) == [(0, "b", after[0].epoch)]
    finally:
        old.close()
        new.close()


def test_a_leader_whose_session_ends_steps_down_at_once(pg_store: PostgresStore) -> None:
    """Its lock went with the session: the next step leads nothing, the one after takes the
    lock again on a new session."""
    elector = pg_store.elector("duty", "a", TTL)
    try:
        first = elector.step()
        sever(elector)
        assert elector.step() == {}
        again = elector.step()
        assert sorted(again) == [0] and again[0].epoch == first[0].epoch
    finally:
        elector.close()


def test_an_sqlite_leader_whose_store_fails_steps_down_at_once(sqlite_store: SqliteStore) -> None:
    """The store answers with an error (here: the table is gone a moment): no leadership."""
    elector = sqlite_store.elector("duty", "a", TTL)
    try:
        first = elector.step()
        with sqlite3.connect(sqlite_store.path) as other:
            other.execute("ALTER TABLE chronoq_leaders RENAME TO chronoq_leaders_away")
        assert elector.step() == {}
        with sqlite3.connect(sqlite_store.path) as other:
            other.execute("ALTER TABLE chronoq_leaders_away RENAME TO chronoq_leaders")
        assert epochs_of(elector.step()) == epochs_of(first)
    finally:
        elector.close()
