"""Redis losing a partition (FLUSHALL, a restart without persistence): the timer store says so
instead of acting on an empty partition, and readers create their lost groups again."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from chronoq.tier.ports import PartitionLost, Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect
from tests.services.redis import PrivateRedis

NOW = 1_800_000_000_000


@pytest.fixture
def store(private_redis: PrivateRedis) -> Iterator[RedisTimerStore]:
    opened = RedisTimerStore(connect(private_redis.url))
    yield opened
    opened.close()


@pytest.fixture
def reader(private_redis: PrivateRedis) -> Iterator[RedisStreamReader]:
    opened = RedisStreamReader(connect(private_redis.url), "chronoq", ["q"], 2, "w1")
    yield opened
    opened.close()


def _flush(server: PrivateRedis) -> None:
    client = connect(server.url)
    client.flushall()
    client.close()


LOSSES: dict[str, Callable[[PrivateRedis], None]] = {
    "flushall": _flush,
    "restart": PrivateRedis.restart,
}


@pytest.mark.parametrize("lose", LOSSES.values(), ids=LOSSES.keys())
def test_after_a_loss_stage_and_move_report_lost_until_taken_over_again(
    private_redis: PrivateRedis, store: RedisTimerStore, lose: Callable[[PrivateRedis], None]
) -> None:
    assert store.take_over(1, 3).accepted
    store.stage(1, 3, [Timer(1, 1, "q", NOW)])
    lose(private_redis)
    with pytest.raises(PartitionLost, match="partition 1: Redis lost it"):
        store.stage(1, 3, [Timer(2, 1, "q", NOW)])
    moved = store.move_due(1, 3, NOW, 10)
    assert moved.lost and not moved.stale and moved.moved == 0
    with pytest.raises(PartitionLost):
        store.trim(1, 3)
    assert store.status(1, NOW).epoch is None
    again = store.take_over(1, 3)
    assert again.accepted and again.lost  # the leader re-stages its horizon from the database
    assert store.stage(1, 3, [Timer(1, 1, "q", NOW)]).added == 1
    assert store.move_due(1, 3, NOW, 10).moved == 1


@pytest.mark.parametrize("lose", LOSSES.values(), ids=LOSSES.keys())
def test_a_reader_creates_its_lost_groups_again_and_reads_on(
    private_redis: PrivateRedis,
    store: RedisTimerStore,
    reader: RedisStreamReader,
    lose: Callable[[PrivateRedis], None],
) -> None:
    assert reader.read(10, 0) == []
    lose(private_redis)
    store.take_over(0, 1)
    store.stage(0, 1, [Timer(7, 70, "q", NOW)])
    store.move_due(0, 1, NOW, 10)
    [delivery] = reader.read(10, 0)  # NOGROUP met, groups created from id 0, entry read
    assert (delivery.job_id, delivery.token, delivery.partition) == (7, 70, 0)
    reader.ack([delivery])
    assert reader.read(10, 0) == []


def test_ack_after_the_groups_were_lost_is_a_no_op(
    private_redis: PrivateRedis, store: RedisTimerStore, reader: RedisStreamReader
) -> None:
    store.take_over(0, 1)
    store.stage(0, 1, [Timer(7, 70, "q", NOW)])
    store.move_due(0, 1, NOW, 10)
    read = reader.read(10, 0)
    _flush(private_redis)
    reader.ack(read)  # nothing to acknowledge any more, and nothing to complain about
