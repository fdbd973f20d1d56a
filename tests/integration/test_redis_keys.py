"""Hash tags: every key of a partition lives in one slot, so its scripts run on Redis Cluster."""

from __future__ import annotations

import re

import pytest
import redis
from redis.crc import key_slot

from chronoq.tier.ports import Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect, partition_keys


def test_every_key_a_partition_writes_maps_to_its_slot(
    redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    store = RedisTimerStore(connect(redis_url), redis_prefix)
    queues = ["emails", "a{b}:c"]
    reader = RedisStreamReader(connect(redis_url), redis_prefix, queues, 4, "w1")
    for partition in range(4):
        store.take_over(partition, 1)
        store.stage(partition, 1, [Timer(partition, 1, q, 10) for q in queues])
        store.stage(partition, 1, [Timer(partition + 10, 1, "emails", 99)])  # stays staged
        store.move_due(partition, 1, 10, 100)
    assert len(reader.read(100, 0)) == 8
    written = [key.decode() for key in redis_client.scan_iter(match=f"{redis_prefix}:*")]
    by_partition: dict[int, set[int]] = {}
    for key in written:
        tag = re.search(r"\{p(\d+)\}", key)
        assert tag, f"{key} carries no partition tag"
        by_partition.setdefault(int(tag[1]), set()).add(key_slot(key.encode()))
    assert by_partition == {p: {key_slot(f"{{p{p}}}".encode())} for p in range(4)}
    # epoch, timers, queues, entries and one stream a queue
    assert len(written) == 4 * (4 + len(queues))
    reader.close()
    store.close()


def test_the_layout_of_a_partitions_keys() -> None:
    keys = partition_keys("chronoq", 7)
    assert keys.entries == "chronoq:{p7}:entries"
    assert (keys.epoch, keys.timers, keys.queues, keys.stream("a:b")) == (
        "chronoq:{p7}:epoch",
        "chronoq:{p7}:timers",
        "chronoq:{p7}:queues",
        "chronoq:{p7}:q:a:b",
    )
    slots = {key_slot(k.encode()) for k in (keys.epoch, keys.timers, keys.stream("x{y}"))}
    assert slots == {key_slot(b"{p7}")}


@pytest.mark.parametrize("prefix", ["", "a{b", "tag}"])
def test_a_prefix_that_would_move_the_hash_tag_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        partition_keys(prefix, 1)
