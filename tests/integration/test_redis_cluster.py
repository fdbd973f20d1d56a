"""Tiered dispatch on a real Redis Cluster (3 masters, 3 replicas: tests.services.redis_cluster):
the client is detected, readers block on every partition at once and wake on a move, a tiered
worker runs jobs, and a master killed mid-dispatch costs nothing once its replica is promoted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from redis.cluster import RedisCluster

from chronoq import App, JobStatus, WorkerOptions
from chronoq.errors import ConfigError, StoreError
from chronoq.tier.ports import Delivery, Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect, partition_keys
from tests.helpers import running_worker, wait_until
from tests.services.redis_cluster import PrivateRedisCluster, started_cluster
from tests.services.tier import PARTITIONS, leading, tiered_app

NOW = 1_800_000_000_000


def test_connect_detects_a_cluster_node(redis_cluster: PrivateRedisCluster) -> None:
    client = connect(redis_cluster.url)
    try:
        assert isinstance(client, RedisCluster)
        assert len(client.get_primaries()) == 3
    finally:
        client.close()


def test_a_database_number_on_a_cluster_is_refused_in_one_line(
    redis_cluster: PrivateRedisCluster,
) -> None:
    with pytest.raises(ConfigError, match="SELECT is not allowed in cluster mode"):
        connect(redis_cluster.url.replace("/0", "/3"))


@pytest.fixture
def store(redis_cluster: PrivateRedisCluster, cluster_prefix: str) -> Iterator[RedisTimerStore]:
    opened = RedisTimerStore(connect(redis_cluster.url), cluster_prefix)
    for partition in range(PARTITIONS):
        opened.take_over(partition, 1)
    yield opened
    opened.close()


def _reader(url: str, prefix: str, consumer: str = "w1") -> RedisStreamReader:
    return RedisStreamReader(connect(url), prefix, ["q"], PARTITIONS, consumer)


def test_partitions_spread_over_the_masters(
    redis_cluster: PrivateRedisCluster, cluster_prefix: str
) -> None:
    masters = {redis_cluster.master_of(partition_keys(cluster_prefix, p).epoch) for p in range(16)}
    assert len(masters) == 3  # what makes one XREADGROUP per partition necessary


def test_a_blocked_read_wakes_on_a_move_in_any_partition(
    redis_cluster: PrivateRedisCluster, cluster_prefix: str, store: RedisTimerStore
) -> None:
    reader = _reader(redis_cluster.url, cluster_prefix)
    try:
        assert reader.read(10, 0) == []
        for partition in range(PARTITIONS):
            got: list[list[Delivery]] = []

            def read(into: list[list[Delivery]] = got) -> None:
                into.append(reader.read(10, 5.0))

            thread = threading.Thread(target=read)
            started = time.monotonic()
            thread.start()
            # Every partition's lane blocks (lanes of the last read still out are reused; a
            # move before they block is read by the sweep anyway).
            wait_until(lambda: _blocked_reads(redis_cluster) >= PARTITIONS)
            job_id = 100 + partition
            store.stage(partition, 1, [Timer(job_id, 1, "q", NOW)])
            assert store.move_due(partition, 1, NOW, 10).moved == 1
            thread.join(timeout=10)
            [[delivery]] = got
            assert (delivery.partition, delivery.job_id) == (partition, job_id)
            assert time.monotonic() - started < 4.0  # woken, not timed out
            reader.ack([delivery])
    finally:
        reader.close()


def test_an_idle_read_blocks_for_its_block_and_no_longer(
    redis_cluster: PrivateRedisCluster, cluster_prefix: str, store: RedisTimerStore
) -> None:
    reader = _reader(redis_cluster.url, cluster_prefix)
    try:
        reader.read(10, 0)
        started = time.monotonic()
        assert reader.read(10, 0.5) == []
        assert 0.45 <= time.monotonic() - started < 2.0
        started = time.monotonic()
        assert reader.read(10, 0.5) == []  # lanes still out are waited for, not doubled
        assert time.monotonic() - started < 2.0
    finally:
        reader.close()


def test_orphans_of_a_dead_consumer_are_claimed_across_nodes(
    redis_cluster: PrivateRedisCluster, cluster_prefix: str, store: RedisTimerStore
) -> None:
    dead = _reader(redis_cluster.url, cluster_prefix, "dead")
    for partition in range(PARTITIONS):
        store.stage(partition, 1, [Timer(200 + partition, 1, "q", NOW)])
        store.move_due(partition, 1, NOW, 10)
    taken = []
    while batch := dead.read(10, 0):
        taken.extend(batch)
    assert len(taken) == PARTITIONS  # read, never acknowledged: the consumer "dies"
    heir = RedisStreamReader(
        connect(redis_cluster.url), cluster_prefix, ["q"], PARTITIONS, "heir", claim_idle=0.2
    )
    try:
        # The entries are claimed once idle for claim_idle (0.2 s): read until they come.
        claimed = wait_until(lambda: heir.read(10, 0), what="the dead consumer's entries")
        assert sorted(d.job_id for d in claimed) == [200 + p for p in range(PARTITIONS)]
        heir.ack(claimed)
    finally:
        heir.close()
        dead.close()


WORK = threading.Event()  # never set: a job's 10 ms of work waits on it


def _blocked_reads(cluster: PrivateRedisCluster) -> int:
    """Clients blocked in a command (XREADGROUP ... BLOCK) over every live node."""
    blocked = 0
    for port in cluster.ports:
        try:
            with cluster.node(port) as node:
                clients = node.client_list()
        except redis.RedisError:
            continue  # a node killed by an earlier test
        blocked += sum(1 for c in clients if "b" in c.get("flags", ""))
    return blocked


def _app(url: str, pg_dsn: str, prefix: str, runs: list[tuple[int, str]]) -> App:
    """A tiered app whose task records, per job, its starts and ends, and says when one job
    started while it was already running (which must never happen)."""
    app = tiered_app(pg_dsn, url, prefix)
    running: set[int] = set()
    lock = threading.Lock()

    @app.task(lease=5.0)
    def work(n: int) -> int:
        with lock:
            job_id = n
            runs.append((job_id, "twice at once" if job_id in running else "start"))
            running.add(job_id)
        WORK.wait(0.01)  # the job's work: 10 ms, long enough for a second start to overlap
        with lock:
            running.discard(job_id)
        return n

    return app


def _done(app: App, ids: list[int]) -> bool:
    return all(app.get_job(i).status == JobStatus.DONE for i in ids)  # type: ignore[union-attr]


def test_a_tiered_worker_runs_jobs_on_a_cluster(
    redis_cluster: PrivateRedisCluster, pg_dsn: str, cluster_prefix: str
) -> None:
    runs: list[tuple[int, str]] = []
    app = _app(redis_cluster.url, pg_dsn, cluster_prefix, runs)
    with (
        app,
        leading(app, redis_cluster.url),
        running_worker(app, WorkerOptions(concurrency=8)),
    ):
        ids = [app.enqueue("work", {"n": n}).id for n in range(40)]
        ids += [
            app.enqueue("work", {"n": 40 + n}, delay=timedelta(seconds=0.5)).id for n in range(20)
        ]
        wait_until(lambda: _done(app, ids), what="every job done")
    assert sorted(n for n, _ in runs) == list(range(60))
    assert {kind for _, kind in runs} == {"start"}


@pytest.fixture
def own_cluster() -> Iterator[PrivateRedisCluster]:
    cluster = started_cluster()
    yield cluster
    cluster.stop()


def test_a_master_killed_mid_dispatch_loses_nothing_and_runs_nothing_twice_at_once(
    own_cluster: PrivateRedisCluster, pg_dsn: str
) -> None:
    prefix = f"chronoq-test-{uuid.uuid4().hex[:8]}"
    runs: list[tuple[int, str]] = []
    app = _app(own_cluster.url, pg_dsn, prefix, runs)
    with (
        app,
        leading(app, own_cluster.url),
        running_worker(app, WorkerOptions(concurrency=8)),
        running_worker(app, WorkerOptions(concurrency=8)),
    ):
        # Due over the next 3 s: some moved before the kill, some during, some after.
        ids = [
            app.enqueue("work", {"n": n}, delay=timedelta(milliseconds=15 * n)).id
            for n in range(200)
        ]
        wait_until(lambda: len(runs) >= 20, what="dispatch under way")
        killed = own_cluster.kill_master_of(partition_keys(prefix, 0).epoch)
        more = [app.enqueue("work", {"n": 200 + n}).id for n in range(40)]
        # Entries written to the killed master and not yet replicated are lost with it; their
        # jobs are still pending and are staged again after 30 s (docs/tier.md).
        wait_until(lambda: _done(app, ids + more), timeout=90, what="every job done")
        assert own_cluster.master_of(partition_keys(prefix, 0).epoch) != killed
    assert sorted({n for n, _ in runs}) == list(range(240))
    assert [run for run in runs if run[1] != "start"] == []


def test_while_a_master_is_down_the_partitions_of_the_others_are_still_read(
    own_cluster: PrivateRedisCluster,
) -> None:
    partitions = 16  # spread over all 3 masters
    prefix = f"chronoq-test-{uuid.uuid4().hex[:8]}"
    store = RedisTimerStore(connect(own_cluster.url), prefix)
    reader = RedisStreamReader(connect(own_cluster.url), prefix, ["q"], partitions, "w1")
    try:
        for partition in range(partitions):
            store.take_over(partition, 1)
        assert reader.read(10, 0) == []  # orphans claimed: the next round is 15 s away
        served_by = {
            p: own_cluster.master_of(partition_keys(prefix, p).epoch) for p in range(partitions)
        }
        victim = served_by[0]
        keys0 = partition_keys(prefix, 0).epoch
        alive = next(p for p in range(partitions) if served_by[p] != victim)
        own_cluster.kill(victim)
        store.stage(alive, 1, [Timer(77, 1, "q", NOW)])
        assert store.move_due(alive, 1, NOW, 10).moved == 1
        # The sweep's pipeline fails (a node of it is down), the lanes of the dead master's
        # partitions fail; the lane of `alive` still delivers, before any promotion.
        [delivery] = reader.read(10, 3.0)
        assert (delivery.partition, delivery.job_id) == (alive, 77)
        reader.ack([delivery])
        wait_until(
            lambda: own_cluster.healthy() and own_cluster.master_of(keys0) != victim,
            timeout=30,
            what="a replica promoted",
        )
        # Writes the replica had not received are lost with the master (the epoch among them,
        # when it was written just before): a leader takes the partition over again.
        assert store.take_over(0, 1).accepted
        store.stage(0, 1, [Timer(78, 1, "q", NOW)])
        assert store.move_due(0, 1, NOW, 10).moved == 1
        got = wait_until(lambda: _read_quietly(reader), what="partition 0 read again")
        assert [(d.partition, d.job_id) for d in got] == [(0, 78)]
    finally:
        reader.close()
        store.close()


def _read_quietly(reader: RedisStreamReader) -> list[Delivery]:
    try:
        return reader.read(10, 0.5)
    except StoreError:
        return []  # what the worker's reader thread does: log, pause, read again
