"""Contract: the timer store of tiered dispatch (`TimerStore`), read through a `StreamReader`.

Every adapter runs this suite through the `tier` fixture: Redis, one server and a Redis Cluster
of 3 masters and 3 replicas (tests.services.redis_cluster). What it pins:
epochs fence every mutation, a timer moves once and never before it is due, moves keep score
order and land on the timer's own queue, and a trim keeps every entry a group still needs.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from chronoq.tier.ports import (
    Delivery,
    PartitionLost,
    StaleEpoch,
    StreamReader,
    Timer,
    TimerStore,
)
from chronoq.tier.redis import MAX_MOVE_LIMIT, RedisStreamReader, RedisTimerStore, connect

NOW = 1_800_000_000_000  # ms: any instant works, the store keeps no clock of its own
P = 3  # the partition most tests use


@dataclass
class Tier:
    store: TimerStore
    open_reader: Callable[[Sequence[str], int], StreamReader]
    readers: list[StreamReader] = field(default_factory=list)

    def reader(self, queues: Sequence[str] = ("q",), partitions: int = P + 1) -> StreamReader:
        opened = self.open_reader(queues, partitions)
        self.readers.append(opened)
        return opened


@pytest.fixture(params=["redis", "redis-cluster"])
def tier(request: pytest.FixtureRequest) -> Iterator[Tier]:
    if request.param == "redis":
        url: str = request.getfixturevalue("redis_url")
        prefix: str = request.getfixturevalue("redis_prefix")
    else:
        url = request.getfixturevalue("redis_cluster").url
        prefix = request.getfixturevalue("cluster_prefix")

    def open_reader(queues: Sequence[str], partitions: int) -> StreamReader:
        consumer = f"w-{uuid.uuid4().hex[:6]}"
        return RedisStreamReader(connect(url), prefix, queues, partitions, consumer)

    opened = Tier(RedisTimerStore(connect(url), prefix), open_reader)
    yield opened
    for reader in opened.readers:
        reader.close()
    opened.store.close()


def timers(*dues: int, queue: str = "q", first_id: int = 1) -> list[Timer]:
    return [Timer(first_id + i, 100 + i, queue, due) for i, due in enumerate(dues)]


def drain(reader: StreamReader) -> list[Delivery]:
    """Everything the reader can get without waiting."""
    got: list[Delivery] = []
    while batch := reader.read(100, 0):
        got.extend(batch)
    return got


def led(store: TimerStore, partition: int = P, epoch: int = 1) -> TimerStore:
    assert store.take_over(partition, epoch).accepted
    return store


# -- take over ------------------------------------------------------------------------------


def test_take_over_accepts_a_higher_epoch_and_refuses_a_lower_one(tier: Tier) -> None:
    store = tier.store
    first = store.take_over(P, 5)
    assert first.accepted and first.lost  # nothing was stored: a brand-new store reads as lost
    assert store.take_over(P, 7) == store.take_over(P, 7)  # the same epoch again is accepted
    assert store.take_over(P, 7).accepted and not store.take_over(P, 7).lost
    assert not store.take_over(P, 6).accepted
    assert store.status(P, NOW).epoch == 7


def test_epochs_belong_to_one_partition(tier: Tier) -> None:
    store = led(tier.store, P, 9)
    assert store.take_over(P + 1, 1).accepted
    assert store.status(P, NOW).epoch == 9 and store.status(P + 1, NOW).epoch == 1


# -- stage and move -------------------------------------------------------------------------


def test_move_takes_exactly_the_timers_due_by_now_never_one_early(tier: Tier) -> None:
    store = led(tier.store)
    reader = tier.reader()
    assert store.stage(P, 1, timers(NOW - 1, NOW, NOW + 1)).added == 3
    moved = store.move_due(P, 1, NOW, 100)
    assert (moved.moved, moved.stale, moved.lost, moved.next_due_ms) == (2, False, False, NOW + 1)
    assert [(d.job_id, d.token, d.partition) for d in drain(reader)] == [(1, 100, P), (2, 101, P)]
    assert store.move_due(P, 1, NOW, 100).moved == 0  # a timer moves once
    assert store.move_due(P, 1, NOW + 1, 100).moved == 1
    assert store.move_due(P, 1, NOW + 1, 100).next_due_ms is None


def test_moves_keep_score_order(tier: Tier) -> None:
    store = led(tier.store)
    reader = tier.reader()
    dues = [NOW - 1000 + i for i in range(60)]
    shuffled = timers(*dues)
    random.Random(7).shuffle(shuffled)
    store.stage(P, 1, shuffled)
    while store.move_due(P, 1, NOW, 7).moved:  # small batches: order holds across calls too
        pass
    assert [d.job_id for d in drain(reader)] == list(range(1, 61))


def test_each_timer_lands_on_its_own_queue_stream(tier: Tier) -> None:
    store = led(tier.store)
    queues = ("emails", "reports:daily", "a{b}c")  # a queue may hold colons and braces
    reader = tier.reader(queues)
    for i, queue in enumerate(queues):
        store.stage(P, 1, timers(NOW, NOW, queue=queue, first_id=10 * i + 1))
    assert store.move_due(P, 1, NOW, 100).moved == 6
    got = sorted((d.queue, d.job_id) for d in drain(reader))
    assert got == sorted((q, 10 * i + n) for i, q in enumerate(queues) for n in (1, 2))


def test_a_move_is_bounded_by_its_limit(tier: Tier) -> None:
    store = led(tier.store)
    store.stage(P, 1, timers(*[NOW] * 25))
    assert [store.move_due(P, 1, NOW, 10).moved for _ in range(4)] == [10, 10, 5, 0]


def test_staging_a_timer_again_updates_its_score(tier: Tier) -> None:
    store = led(tier.store)
    assert store.stage(P, 1, timers(NOW)).added == 1
    assert store.stage(P, 1, timers(NOW + 500)).added == 0  # the same member: no duplicate
    assert store.status(P, NOW).staged == 1
    assert store.move_due(P, 1, NOW, 10).moved == 0
    assert store.move_due(P, 1, NOW + 500, 10).moved == 1


def test_a_large_stage_is_split_and_counted_whole(tier: Tier) -> None:
    store = led(tier.store)
    assert store.stage(P, 1, timers(*range(NOW, NOW + 2500))).added == 2500
    assert store.status(P, NOW + 2500).staged == 2500


def test_partitions_do_not_share_timers(tier: Tier) -> None:
    store = led(tier.store)
    led(store, P + 1)
    store.stage(P, 1, timers(NOW))
    store.stage(P + 1, 1, timers(NOW, NOW))
    assert store.move_due(P, 1, NOW, 10).moved == 1
    assert store.move_due(P + 1, 1, NOW, 10).moved == 2


# -- fencing --------------------------------------------------------------------------------


def test_a_stale_epoch_stages_and_moves_nothing_and_says_so(tier: Tier) -> None:
    store = led(tier.store, epoch=1)
    store.stage(P, 1, timers(NOW))
    led(store, epoch=2)
    with pytest.raises(StaleEpoch, match="epoch 1 is stale"):
        store.stage(P, 1, timers(NOW, first_id=50))
    moved = store.move_due(P, 1, NOW, 10)
    assert moved.stale and not moved.lost and moved.moved == 0
    with pytest.raises(StaleEpoch):
        store.trim(P, 1)
    assert store.status(P, NOW).staged == 1  # the stale stage wrote nothing
    assert store.move_due(P, 2, NOW, 10).moved == 1  # the current epoch moves


def test_a_stage_with_no_timers_still_checks_the_epoch(tier: Tier) -> None:
    store = led(tier.store, epoch=2)
    assert store.stage(P, 2, []).added == 0
    with pytest.raises(StaleEpoch):
        store.stage(P, 1, [])


def test_a_partition_never_taken_over_reads_as_lost(tier: Tier) -> None:
    store = tier.store
    with pytest.raises(PartitionLost, match="partition 3"):
        store.stage(P, 1, timers(NOW))
    moved = store.move_due(P, 1, NOW, 10)
    assert moved.lost and not moved.stale and moved.moved == 0
    with pytest.raises(PartitionLost):
        store.trim(P, 1)
    assert store.status(P, NOW).epoch is None


def test_a_forced_take_over_records_a_lower_epoch_and_fences_the_higher(tier: Tier) -> None:
    """A leader whose coordination service was rebuilt holds a lower epoch than Redis: once it
    has shown that, it takes the partition over anyway, and the higher epoch is fenced."""
    store = led(tier.store, epoch=500)
    store.stage(P, 500, timers(NOW))
    assert not store.take_over(P, 5).accepted
    forced = store.take_over(P, 5, force=True)
    assert forced.accepted and not forced.lost
    assert store.status(P, NOW).epoch == 5
    assert store.move_due(P, 5, NOW, 10).moved == 1  # what the old epoch staged still moves
    assert store.move_due(P, 500, NOW, 10).lost  # the old epoch reads Redis as having lost it


def test_an_epoch_above_the_stored_one_reads_as_lost(tier: Tier) -> None:
    """Redis holding a lower epoch than a leader's own means it came back from older data."""
    store = led(tier.store, epoch=3)
    with pytest.raises(PartitionLost):
        store.stage(P, 4, timers(NOW))
    assert store.move_due(P, 4, NOW, 10).lost


# -- trim -----------------------------------------------------------------------------------


def test_trim_keeps_pending_and_undelivered_entries(tier: Tier) -> None:
    store = led(tier.store)
    reader = tier.reader()
    store.stage(P, 1, timers(NOW - 2, NOW - 1, NOW))
    store.move_due(P, 1, NOW, 10)
    [first] = reader.read(1, 0)
    assert store.trim(P, 1) == 0  # first is pending, the others not delivered
    reader.ack([first])
    assert store.trim(P, 1) == 1
    second, third = reader.read(10, 0)
    reader.ack([third])
    assert store.trim(P, 1) == 0  # second is still pending: it and everything after it stay
    assert store.status(P, NOW).stream_length == 2
    reader.ack([second])
    assert store.trim(P, 1) == 2
    assert store.status(P, NOW).stream_length == 0


def test_a_move_names_the_entries_it_added(tier: Tier) -> None:
    store = led(tier.store)
    reader = tier.reader()
    store.stage(P, 1, timers(NOW - 1, NOW))
    moved = store.move_due(P, 1, NOW, 10)
    assert [(e.job_id, e.token) for e in moved.entries] == [(1, 100), (2, 101)]
    read = reader.read(10, 0)
    assert [d.entry_id for d in read] == [e.entry_id for e in moved.entries]


def test_waiting_entries_are_those_not_read_or_not_acknowledged(tier: Tier) -> None:
    store = led(tier.store)
    reader = tier.reader(queues=("q", "unread"))
    store.stage(P, 1, timers(NOW - 2, NOW - 1, NOW))
    store.stage(P, 1, timers(NOW, queue="unread", first_id=10))
    moved = {e.job_id: e.entry_id for e in store.move_due(P, 1, NOW, 10).entries}
    asked = [("q", moved[1]), ("q", moved[2]), ("q", moved[3]), ("unread", moved[10])]
    assert store.waiting(P, asked) == set(asked)  # none read yet
    read = {d.job_id: d for d in reader.read(10, 0)}
    assert store.waiting(P, asked) == set(asked)  # read, none acknowledged
    reader.ack([read[1], read[10]])
    assert store.waiting(P, asked) == {asked[1], asked[2]}
    reader.ack([read[2], read[3]])
    store.trim(P, 1)
    assert store.waiting(P, asked) == set()
    assert store.waiting(P, [("never-written", "1-0")]) == set()
    assert store.waiting(P, []) == set()


def test_a_job_whose_entry_waits_is_not_staged_again(tier: Tier) -> None:
    """A new leader stages its horizon: a job whose entry its predecessor moved, under the same
    token, and that still waits, gets no second entry; it is named in the reply instead."""
    store = led(tier.store)
    reader = tier.reader()
    store.stage(P, 1, timers(NOW))
    [entry] = store.move_due(P, 1, NOW, 10).entries
    again = store.stage(P, 1, timers(NOW))
    assert again.added == 0 and again.moved == (entry,)
    assert store.move_due(P, 1, NOW, 10).moved == 0
    [read] = reader.read(10, 0)
    assert store.stage(P, 1, timers(NOW)).moved == (entry,)  # read, not acknowledged: waits
    reader.ack([read])
    assert store.stage(P, 1, timers(NOW)).added == 1  # acknowledged, job pending: again
    store.move_due(P, 1, NOW, 10)
    assert store.stage(P, 1, timers(NOW)).added == 0  # and that new entry waits in its turn
    other_token = store.stage(P, 1, [Timer(1, 999, "q", NOW)])  # the job ran and came back
    assert other_token.added == 1 and other_token.moved == ()


def test_a_queue_no_worker_reads_keeps_its_entries_waiting(tier: Tier) -> None:
    store = led(tier.store)
    store.stage(P, 1, timers(NOW, queue="nobody"))
    [entry] = store.move_due(P, 1, NOW, 10).entries
    assert store.waiting(P, [("nobody", entry.entry_id)]) == {("nobody", entry.entry_id)}


def test_trim_forgets_consumers_long_idle_that_hold_nothing(
    tier: Tier, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that stopped leaves its consumer in the group; the trim pass deletes it once
    idle past DEAD_CONSUMER_IDLE with nothing pending. One holding entries stays for its
    peers to claim them from."""
    store = led(tier.store)
    gone, holding = tier.reader(), tier.reader()
    store.stage(P, 1, timers(NOW - 1, NOW))
    store.move_due(P, 1, NOW, 10)
    gone.ack(gone.read(1, 0))
    assert len(holding.read(1, 0)) == 1  # pending, never acknowledged
    monkeypatch.setattr("chronoq.tier.redis.timers.DEAD_CONSUMER_IDLE", 0.0)
    store.trim(P, 1)
    assert isinstance(store, RedisTimerStore)
    stream = store.keys(P).stream("q")
    consumers = store.client.xinfo_consumers(stream, "chronoq")
    assert [int(c["pending"]) for c in consumers] == [1]


def test_trim_keeps_everything_no_group_has_read(tier: Tier) -> None:
    store = led(tier.store)
    store.stage(P, 1, timers(NOW, NOW, queue="unread"))
    store.move_due(P, 1, NOW, 10)
    assert store.trim(P, 1) == 0
    assert store.status(P, NOW).stream_length == 2


# -- status and input -----------------------------------------------------------------------


def test_status_counts(tier: Tier) -> None:
    store = led(tier.store, epoch=4)
    reader = tier.reader(("a", "b"))
    store.stage(P, 4, timers(NOW - 1, NOW, queue="a") + timers(NOW, NOW + 1, queue="b", first_id=9))
    before = store.status(P, NOW)
    assert (before.epoch, before.staged, before.due, before.stream_length) == (4, 4, 3, 0)
    store.move_due(P, 4, NOW, 10)
    moved = store.status(P, NOW)
    assert (moved.staged, moved.due, moved.stream_length, moved.stream_lag) == (1, 0, 3, 3)
    assert len(drain(reader)) == 3
    read = store.status(P, NOW)
    assert (read.stream_length, read.stream_lag) == (3, 0)  # delivered, not yet acknowledged


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda s: s.take_over(P, -1), "the epoch must be at least 0"),
        (lambda s: s.take_over(-1, 1), "a partition must be an integer of at least 0"),
        (lambda s: s.move_due(P, 1, NOW, 0), "the move limit must be at least 1"),
        (lambda s: s.move_due(P, 1, NOW, MAX_MOVE_LIMIT + 1), "the move limit must be at most"),
        (lambda s: s.move_due(P, 1, 2**53, 10), "now_ms must be at most"),
        (lambda s: s.stage(P, 1, [Timer(1, 1, "", NOW)]), "queue must be a non-empty"),
        (lambda s: s.stage(P, 1, [Timer(True, 1, "q", NOW)]), "job_id must be an integer"),
        (lambda s: s.stage(P, 1, [Timer(1, 1, "q", 1.5)]), "due_ms must be an integer"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_refused_naming_the_problem(
    tier: Tier, call: Callable[[TimerStore], object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        call(led(tier.store))
