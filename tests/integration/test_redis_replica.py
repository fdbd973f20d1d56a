"""A Redis that turns into a replica and back (a failover, a replica promoted): every failure of
the stream reader is a StoreError its worker can log and retry, and reading resumes afterwards.

A private redis-server made a replica of a master that does not exist stays read-only (READONLY
on every write: XREADGROUP, XAUTOCLAIM, XGROUP CREATE, EVALSHA) and keeps its data, as a
replica does until its first sync; `REPLICAOF NO ONE` promotes it again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from chronoq import JobStatus, WorkerOptions
from chronoq.errors import StoreError
from chronoq.tier.ports import Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, RedisUnavailable, connect
from chronoq.tier.source import StreamJobSource
from chronoq.worker.source import JobSource
from tests.helpers import running_worker, wait_until
from tests.services.redis import PrivateRedis, free_port
from tests.services.tier import leading, tiered_app

NOW = 1_800_000_000_000


def _replica_of_nothing(server: PrivateRedis) -> None:
    client = redis.Redis(port=server.port)
    try:
        client.replicaof("127.0.0.1", free_port())  # nothing listens there: never synced
    finally:
        client.close()


def _promote(server: PrivateRedis, *, empty: bool = False) -> None:
    client = redis.Redis(port=server.port)
    try:
        client.replicaof("NO", "ONE")
        if empty:  # a promoted replica that had not synced: nothing of the old master's
            client.flushall()
    finally:
        client.close()


@pytest.fixture
def store(private_redis: PrivateRedis) -> Iterator[RedisTimerStore]:
    opened = RedisTimerStore(connect(private_redis.url))
    opened.take_over(0, 1)
    yield opened
    opened.close()


@pytest.fixture
def reader(private_redis: PrivateRedis) -> Iterator[RedisStreamReader]:
    opened = RedisStreamReader(connect(private_redis.url), "chronoq", ["q"], 2, "w1")
    yield opened
    opened.close()


def _move(store: RedisTimerStore, *job_ids: int) -> None:
    store.stage(0, 1, [Timer(job_id, job_id * 10, "q", NOW) for job_id in job_ids])
    assert store.move_due(0, 1, NOW, 100).moved == len(job_ids)


@pytest.mark.parametrize("empty", [False, True], ids=["kept-data", "empty"])
def test_a_read_only_redis_is_a_store_error_and_reads_resume_once_promoted(
    private_redis: PrivateRedis,
    store: RedisTimerStore,
    reader: RedisStreamReader,
    empty: bool,
) -> None:
    _replica_of_nothing(private_redis)
    # The first read claims orphans (XAUTOCLAIM in a pipeline), then reads (XREADGROUP): both
    # are writes a replica refuses.
    with pytest.raises(RedisUnavailable, match="read only replica"):
        reader.read(10, 0)
    with pytest.raises(RedisUnavailable):
        reader.read(10, 0)
    with pytest.raises(RedisUnavailable):
        reader.ensure_groups()
    _promote(private_redis, empty=empty)
    if empty:
        store.take_over(0, 1)  # what the partition's leader does on finding it lost
    _move(store, 7)
    [delivery] = reader.read(10, 0)  # NOGROUP on the empty one: its group is created again
    assert (delivery.job_id, delivery.token) == (7, 70)
    reader.ack([delivery])


def test_claiming_orphans_on_a_read_only_redis_is_a_store_error(
    private_redis: PrivateRedis, reader: RedisStreamReader
) -> None:
    _replica_of_nothing(private_redis)
    with pytest.raises(StoreError) as raised:
        reader._autoclaim(10)
    assert isinstance(raised.value, RedisUnavailable)


def _claim_often(source: JobSource) -> JobSource:
    """Orphans looked for every 0.5 s rather than every 15 s, so a short episode meets one."""
    assert isinstance(source, StreamJobSource)
    assert isinstance(source.reader, RedisStreamReader)
    source.reader.claim_idle = 1.0
    return source


def test_a_tiered_worker_runs_jobs_again_after_its_redis_was_a_replica_for_a_while(
    private_redis: PrivateRedis, pg_dsn: str, redis_prefix: str
) -> None:
    app = tiered_app(pg_dsn, private_redis.url, redis_prefix)

    @app.task(lease=5.0)
    def add(a: int, b: int) -> int:
        return a + b

    def done(ids: list[int]) -> bool:
        return all(app.get_job(i).status == JobStatus.DONE for i in ids)  # type: ignore[union-attr]

    with (
        app,
        leading(app, private_redis.url),
        running_worker(app, WorkerOptions(concurrency=4), wrap_source=_claim_often),
    ):
        before = [app.enqueue("add", {"a": n, "b": 1}).id for n in range(10)]
        wait_until(lambda: done(before), what="the jobs before the episode done")
        _replica_of_nothing(private_redis)
        episode = [app.enqueue("add", {"a": n, "b": 2}).id for n in range(10)]
        # The reader meets READONLY on its orphan claims (and its reads) meanwhile.
        wait_until(lambda: _refused(private_redis, "xautoclaim") >= 2, what="refused claims")
        _promote(private_redis)
        after = [app.enqueue("add", {"a": n, "b": 3}).id for n in range(20)]
        wait_until(lambda: done(episode + after), timeout=30, what="every job done after it")


def _refused(server: PrivateRedis, command: str) -> int:
    """How many `command` calls the server refused (READONLY among them)."""
    client = redis.Redis(port=server.port)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get(f"cmdstat_{command}", {}).get("rejected_calls", 0))
