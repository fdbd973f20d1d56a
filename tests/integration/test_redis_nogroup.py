"""Groups lost from many streams (a restart without persistence, a flush): a reader creates
each lost group again once, not once per stream per stream. Counted on a private Redis by its
own statistics (INFO commandstats: XGROUP calls since the restart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis

from chronoq.tier.redis import RedisStreamReader, connect, partition_keys
from tests.services.redis import PrivateRedis

QUEUES = ["a", "b", "c"]
PARTITIONS = 40
STREAMS = len(QUEUES) * PARTITIONS
Readers = Callable[..., RedisStreamReader]


def _xgroup_calls(server: PrivateRedis) -> int:
    client = redis.Redis(port=server.port)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get("cmdstat_xgroup|create", stats.get("cmdstat_xgroup", {})).get("calls", 0))


@pytest.fixture
def open_reader(private_redis: PrivateRedis) -> Iterator[Readers]:
    opened: list[RedisStreamReader] = []

    def reader(claim_idle: float = 30.0) -> RedisStreamReader:
        client = connect(private_redis.url)
        made = RedisStreamReader(client, "chronoq", QUEUES, PARTITIONS, "w1", claim_idle=claim_idle)
        opened.append(made)
        return made

    yield reader
    for made in opened:
        made.close()


@pytest.mark.parametrize("claim_idle", [30.0, 0.001], ids=["read", "claim-orphans"])
def test_after_a_restart_each_group_is_created_once(
    private_redis: PrivateRedis, open_reader: Readers, claim_idle: float
) -> None:
    reader = open_reader(claim_idle)
    assert reader.read(10, 0) == []  # the first read claims orphans: the next claim is later
    private_redis.restart()
    assert reader.read(10, 0) == []  # "read": XREADGROUP meets NOGROUP; else XAUTOCLAIM does
    assert reader.read(10, 0) == []
    assert 1 <= _xgroup_calls(private_redis) <= STREAMS + 1


def test_one_lost_group_is_created_again_alone(
    private_redis: PrivateRedis, open_reader: Readers
) -> None:
    reader = open_reader()
    assert reader.read(10, 0) == []
    client = connect(private_redis.url)
    try:
        client.xgroup_destroy(partition_keys("chronoq", 17).stream("b"), "chronoq")
        client.config_resetstat()
        assert reader.read(10, 0) == []
        assert _xgroup_calls(private_redis) == 1
        groups = client.xinfo_groups(partition_keys("chronoq", 17).stream("b"))
        assert [group["name"] for group in groups] == [b"chronoq"]
    finally:
        client.close()
