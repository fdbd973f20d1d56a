"""The stream reader on a real Redis: woken by a move, acknowledgements, orphans claimed from
a dead consumer, surplus entries handed out later, bounded blocking."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from chronoq.tier.ports import Delivery, Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect, partition_keys
from tests.helpers import wait_until

NOW = 1_800_000_000_000
Readers = Callable[..., RedisStreamReader]


@pytest.fixture
def store(redis_url: str, redis_prefix: str) -> Iterator[RedisTimerStore]:
    opened = RedisTimerStore(connect(redis_url), redis_prefix)
    for partition in range(3):
        opened.take_over(partition, 1)
    yield opened
    opened.close()


@pytest.fixture
def readers(redis_url: str, redis_prefix: str) -> Iterator[Readers]:
    """Opens readers of queue "q" over 3 partitions; closes them at the end."""
    opened: list[RedisStreamReader] = []

    def open_reader(consumer: str = "w1", **options: object) -> RedisStreamReader:
        client = connect(redis_url, name=f"{redis_prefix}-{consumer}")
        reader = RedisStreamReader(client, redis_prefix, ["q"], 3, consumer, **options)  # type: ignore[arg-type]
        opened.append(reader)
        return reader

    yield open_reader
    for reader in opened:
        reader.close()


def _due(store: RedisTimerStore, partition: int, *job_ids: int) -> None:
    store.stage(partition, 1, [Timer(job_id, job_id * 10, "q", NOW) for job_id in job_ids])
    assert store.move_due(partition, 1, NOW, 100).moved == len(job_ids)


def _blocked(client: redis.Redis, name: str) -> bool:
    return any(c["name"] == name and c["cmd"] == "xreadgroup" for c in client.client_list())


def test_a_blocked_read_wakes_when_a_move_happens(
    store: RedisTimerStore,
    readers: Readers,
    redis_client: redis.Redis,
    redis_prefix: str,
    request: pytest.FixtureRequest,
) -> None:
    reader = readers("sleeper")
    woke: list[tuple[float, list[Delivery]]] = []

    def read() -> None:
        got = reader.read(10, 5.0)
        woke.append((time.perf_counter(), got))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    wait_until(lambda: _blocked(redis_client, f"{redis_prefix}-sleeper"), what="XREADGROUP")
    store.stage(2, 1, [Timer(42, 420, "q", NOW)])
    moved_at = time.perf_counter()
    assert store.move_due(2, 1, NOW, 10).moved == 1
    thread.join(timeout=10)
    [(woke_at, got)] = woke
    assert [(d.job_id, d.token, d.partition, d.queue) for d in got] == [(42, 420, 2, "q")]
    # A measurement, not a threshold (bench/tier_redis.py measures it properly): shown by -rP.
    latency_ms = round((woke_at - moved_at) * 1000, 3)
    request.node.user_properties.append(("wakeup_ms", latency_ms))
    print(f"wake-up after a move: {latency_ms} ms")


def test_ack_clears_the_pending_entries(
    store: RedisTimerStore, readers: Readers, redis_client: redis.Redis, redis_prefix: str
) -> None:
    reader = readers()
    _due(store, 0, 1, 2)
    _due(store, 1, 3)
    got = reader.read(10, 0)
    assert sorted(d.job_id for d in got) == [1, 2, 3]
    stream = partition_keys(redis_prefix, 0).stream("q")
    assert redis_client.xpending(stream, "chronoq")["pending"] == 2
    reader.ack(got)
    assert redis_client.xpending(stream, "chronoq")["pending"] == 0
    reader.ack([])  # nothing to do


def test_a_read_returns_at_most_count_and_keeps_the_rest_for_the_next(
    store: RedisTimerStore, readers: Readers
) -> None:
    reader = readers()
    for partition in range(3):
        _due(store, partition, *(10 * partition + n for n in range(1, 3)))
    first = reader.read(2, 0)  # COUNT is per stream: Redis hands out up to 6
    second = reader.read(3, 0)
    third = reader.read(3, 0)
    assert (len(first), len(second), len(third)) == (2, 3, 1)
    seen = sorted(d.job_id for d in first + second + third)
    assert seen == [1, 2, 11, 12, 21, 22]


def test_surplus_held_past_claim_idle_comes_back_by_xautoclaim(
    store: RedisTimerStore, readers: Readers, redis_client: redis.Redis, redis_prefix: str
) -> None:
    reader = readers(claim_idle=0.2)
    for partition in range(3):
        _due(store, partition, partition + 1)
    [first] = reader.read(1, 0)  # the other two wait in the reader
    reader.ack([first])
    later = [partition_keys(redis_prefix, p).stream("q") for p in range(3) if p + 1 != first.job_id]

    def idle_ms(stream: str) -> int:
        [entry] = redis_client.xpending_range(stream, "chronoq", "-", "+", 1)
        return int(entry["time_since_delivered"])

    wait_until(lambda: all(idle_ms(stream) >= 300 for stream in later), what="idle entries")
    rest = reader.read(10, 0)  # dropped from the surplus, claimed again by this same reader
    assert sorted(d.job_id for d in [first, *rest]) == [1, 2, 3]
    for stream in later:
        [entry] = redis_client.xpending_range(stream, "chronoq", "-", "+", 1)
        assert entry["times_delivered"] == 2


def test_entries_of_a_dead_consumer_are_claimed_after_claim_idle(
    store: RedisTimerStore, readers: Readers, redis_client: redis.Redis, redis_prefix: str
) -> None:
    dead = readers("dead")
    _due(store, 1, 5, 6, 7)
    taken = dead.read(10, 0)  # and then it dies without acknowledging
    heir = readers("heir", claim_idle=0.2)
    claimed: list[Delivery] = []

    def claim_some() -> bool:
        claimed.extend(heir.read(10, 0.05))
        return len(claimed) >= 3

    wait_until(claim_some, what="XAUTOCLAIM of the dead consumer's entries")
    assert sorted((d.entry_id, d.job_id) for d in claimed) == sorted(
        (d.entry_id, d.job_id) for d in taken
    )
    stream = partition_keys(redis_prefix, 1).stream("q")
    entries = redis_client.xpending_range(stream, "chronoq", "-", "+", 10)
    assert {e["consumer"] for e in entries} == {b"heir"}
    assert {e["times_delivered"] for e in entries} == {2}
    heir.ack(claimed)
    assert redis_client.xpending(stream, "chronoq")["pending"] == 0


def test_an_unreadable_entry_is_acknowledged_and_skipped(
    store: RedisTimerStore,
    readers: Readers,
    redis_client: redis.Redis,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = readers()
    stream = partition_keys(redis_prefix, 0).stream("q")
    redis_client.xadd(stream, {"something": "else"})
    _due(store, 0, 9)
    with caplog.at_level(logging.WARNING, logger="chronoq.dispatch"):
        got = reader.read(10, 0)
    assert [d.job_id for d in got] == [9]
    assert "without a job id or token" in caplog.text
    assert redis_client.xpending(stream, "chronoq")["pending"] == 1  # only job 9's entry


def test_close_leaves_the_group_only_without_pending_entries(
    store: RedisTimerStore, readers: Readers, redis_client: redis.Redis, redis_prefix: str
) -> None:
    busy, idle = readers("busy"), readers("idle")
    _due(store, 0, 1)
    idle.ack(idle.read(10, 0))  # idle joined the group, and holds nothing now
    _due(store, 0, 2)
    assert len(busy.read(10, 0)) == 1  # pending with busy until acknowledged
    stream = partition_keys(redis_prefix, 0).stream("q")
    joined = {c["name"] for c in redis_client.xinfo_consumers(stream, "chronoq")}
    assert joined == {b"busy", b"idle"}
    busy.close()
    idle.close()
    left = {c["name"] for c in redis_client.xinfo_consumers(stream, "chronoq")}
    assert left == {b"busy"}  # its entry stays claimable by the others


@pytest.mark.parametrize(
    ("count", "block", "problem"),
    [
        (0, 1.0, "count must be a positive integer"),
        (2.5, 1.0, "count must be a positive integer"),
        (1, -1.0, "block must be a number of seconds of at least 0"),
        (1, 9.5, "must end 1.0s before the client's socket timeout"),
    ],
)
def test_bad_read_arguments_are_refused(
    readers: Readers, count: float, block: float, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        readers().read(count, block)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"queues": []}, "queues must be a non-empty list"),
        ({"queues": "q"}, "queues must be a non-empty list"),
        ({"partitions": 0}, "partitions must be at least 1"),
        ({"consumer": " "}, "the consumer must be a non-empty name"),
        ({"claim_idle": 0}, "claim_idle must be a positive number"),
        ({"prefix": "x{y}"}, "must not hold braces"),
    ],
)
def test_bad_reader_settings_are_refused(
    redis_url: str, options: dict[str, object], problem: str
) -> None:
    settings: dict[str, object] = {
        "prefix": f"chronoq-test-{uuid.uuid4().hex[:8]}",
        "queues": ["q"],
        "partitions": 1,
        "consumer": "w1",
    } | options
    client = connect(redis_url)
    with pytest.raises(ValueError, match=problem):
        RedisStreamReader(client, **settings)  # type: ignore[arg-type]
    client.close()
