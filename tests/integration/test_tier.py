"""Tiered dispatch end to end on real PostgreSQL and Redis: leaders stage and move, workers read
the streams and confirm by id. Leadership comes from the static elector here (the etcd elector
has its own suite, and the chaos scenarios run the whole tier with etcd)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import chronoq
from chronoq import App, JobStatus, WorkerOptions
from chronoq.coordination import StaticElector
from chronoq.errors import ConfigError
from chronoq.observability.events import (
    Event,
    MoveRefused,
    Observers,
    PartitionLeaderChanged,
    PartitionReconciled,
    Subscription,
    TimersMoved,
)
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.redis import RedisTimerStore, connect
from chronoq.tier.source import StreamJobSource
from chronoq.tier.wiring import open_reader, partition_count
from chronoq.worker.source import Taken
from tests.helpers import running_worker, wait_until
from tests.services.tier import PARTITIONS, leading
from tests.services.tier import tiered_app as bare_tiered_app


@dataclass
class TierEvents:
    """Every tier event, under a condition a test can wait on."""

    kinds: tuple[type[Event], ...] = (TimersMoved, MoveRefused, PartitionReconciled)
    seen: list[Event] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def subscriptions(self) -> list[Subscription[Any]]:
        return [Subscription(kind, self._record) for kind in self.kinds]

    def _record(self, event: Event) -> None:
        with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    def of(self, kind: type[Event]) -> list[Any]:
        with self.changed:
            return [e for e in self.seen if isinstance(e, kind)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), f"no such event in {self.seen}"


def tiered_app(pg_dsn: str, redis_url: str, prefix: str) -> App:
    app = bare_tiered_app(pg_dsn, redis_url, prefix)

    @app.task(lease=5.0)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(max_attempts=3, lease=5.0)
    def flaky(marker: str) -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            first = conn.execute(
                "SELECT attempts FROM chronoq_jobs WHERE payload->>'marker' = %s", (marker,)
            ).fetchone()
        if first is not None and first[0] < 2:
            raise RuntimeError("the first attempt fails")

    return app


@pytest.fixture
def app(pg_dsn: str, redis_url: str, redis_prefix: str) -> Iterator[App]:
    opened = tiered_app(pg_dsn, redis_url, redis_prefix)
    yield opened
    opened.close()


def running_leader(
    app: App,
    elector: StaticElector,
    redis_url: str,
    events: TierEvents,
    lease_ttl: float | None = None,
) -> AbstractContextManager[TierLeader]:
    return leading(app, redis_url, elector, [events], lease_ttl=lease_ttl)


def statuses(app: App, ids: list[int]) -> list[JobStatus]:
    return [app.get_job(job_id).status for job_id in ids]  # type: ignore[union-attr]


def test_jobs_due_now_and_later_each_run_once(app: App, redis_url: str) -> None:
    events = TierEvents()
    elector = StaticElector("leader-1", PARTITIONS)
    with (
        running_leader(app, elector, redis_url, events),
        running_worker(app, WorkerOptions(concurrency=8)),
    ):
        now_ids = [app.enqueue("add", {"a": n, "b": 1}).id for n in range(40)]
        later_ids = [
            app.enqueue("add", {"a": n, "b": 2}, delay=timedelta(seconds=0.5)).id for n in range(20)
        ]
        ids = now_ids + later_ids
        wait_until(lambda: set(statuses(app, ids)) == {JobStatus.DONE}, what="every job done")
    jobs = [app.get_job(job_id) for job_id in ids]
    assert all(job is not None and job.attempts == 1 for job in jobs)
    for job in jobs:
        assert job is not None and job.started_at is not None
        assert job.started_at >= job.run_at  # never early
    assert sum(e.count for e in events.of(TimersMoved)) >= len(ids)


def test_a_failed_attempt_comes_back_through_the_tier(app: App, redis_url: str) -> None:
    events = TierEvents()
    with (
        running_leader(app, StaticElector("leader-1", PARTITIONS), redis_url, events),
        running_worker(app, WorkerOptions(concurrency=2)),
    ):
        job_id = app.enqueue("flaky", {"marker": "m1"}).id
        wait_until(lambda: statuses(app, [job_id]) == [JobStatus.DONE], what="the retry done")
    job = app.get_job(job_id)
    assert job is not None and job.attempts == 2


def test_a_cancelled_job_is_dropped_by_the_claim(app: App, redis_url: str) -> None:
    events = TierEvents()
    with (
        running_leader(app, StaticElector("leader-1", PARTITIONS), redis_url, events),
        running_worker(app, WorkerOptions(concurrency=2)),
    ):
        # Due late enough that both are seen staged, not yet moved, on a loaded machine too.
        doomed = app.enqueue("add", {"a": 1, "b": 1}, delay=timedelta(seconds=3)).id
        kept = app.enqueue("add", {"a": 1, "b": 2}, delay=timedelta(seconds=3)).id
        wait_until(
            lambda: len(events.of(TimersMoved)) == 0 and _staged(app, redis_url), what="staged"
        )
        cancelled = app.store.job_cancel(doomed)
        assert cancelled is not None and cancelled.status == JobStatus.CANCELLED
        wait_until(lambda: statuses(app, [kept]) == [JobStatus.DONE], what="the kept job done")
    assert statuses(app, [doomed]) == [JobStatus.CANCELLED]


def _staged(app: App, redis_url: str) -> bool:
    timers = RedisTimerStore(connect(redis_url), prefix=app.config.redis_prefix)
    try:
        return sum(timers.status(p, 0).staged for p in range(PARTITIONS)) >= 2
    finally:
        timers.close()


def test_a_stale_leader_moves_nothing_and_jobs_still_run_once(app: App, redis_url: str) -> None:
    old_events = TierEvents(kinds=(MoveRefused, PartitionLeaderChanged))
    new_events = TierEvents()
    old = StaticElector("old-leader", PARTITIONS, epoch=1)
    new = StaticElector("new-leader", PARTITIONS, epoch=2)
    # Static electors both grant for ever, which no etcd does: a long lease keeps the old
    # leader from ever concluding that the new epoch came from a rebuilt etcd.
    with running_leader(app, old, redis_url, old_events, lease_ttl=3600):
        # The old leader has taken its partitions over before the new one takes them away.
        old_events.wait_for(lambda: len(old_events.of(PartitionLeaderChanged)) == PARTITIONS)
        with (
            running_leader(app, new, redis_url, new_events),
            running_worker(app, WorkerOptions(concurrency=8)),
        ):
            ids = [app.enqueue("add", {"a": n, "b": 0}).id for n in range(30)]
            wait_until(lambda: set(statuses(app, ids)) == {JobStatus.DONE}, what="all done")
            old_events.wait_for(lambda: bool(old_events.of(MoveRefused)))
    assert {e.why for e in old_events.of(MoveRefused)} == {"stale"}
    assert not new_events.of(MoveRefused)
    jobs = [app.get_job(job_id) for job_id in ids]
    assert all(job is not None and job.attempts == 1 for job in jobs)


def test_redis_flushed_mid_run_every_job_still_runs(
    pg_dsn: str, private_redis: Any, redis_prefix: str
) -> None:
    app = tiered_app(pg_dsn, private_redis.url, redis_prefix)
    events = TierEvents()
    try:
        with (
            running_leader(app, StaticElector("leader-1", PARTITIONS), private_redis.url, events),
            running_worker(app, WorkerOptions(concurrency=8)),
        ):
            first = [app.enqueue("add", {"a": n, "b": 0}).id for n in range(20)]
            wait_until(lambda: set(statuses(app, first)) == {JobStatus.DONE}, what="first batch")
            later = [
                app.enqueue("add", {"a": n, "b": 1}, delay=timedelta(seconds=1)).id
                for n in range(20)
            ]
            connect(private_redis.url).flushall()
            wait_until(lambda: set(statuses(app, later)) == {JobStatus.DONE}, what="after flush")
            events.wait_for(lambda: bool(events.of(PartitionReconciled)))
    finally:
        app.close()
    reconciles = events.of(PartitionReconciled)
    assert reconciles and all(r.seconds >= 0 for r in reconciles)
    jobs = [app.get_job(job_id) for job_id in first + later]
    assert all(job is not None and job.attempts == 1 for job in jobs)


def test_a_tiered_worker_refuses_a_limited_queue(app: App) -> None:
    app.store.queue_limit(chronoq.storage.base.QueueLimitParams("default", concurrency=2))
    with pytest.raises(ConfigError, match="limits, which tiered dispatch does not carry"):
        chronoq.Worker(app)


def test_tiered_dispatch_on_sqlite_is_refused(sqlite_dsn: str) -> None:
    with pytest.raises(ConfigError, match="tiered dispatch needs PostgreSQL"):
        App(
            dsn=sqlite_dsn,
            dispatch="tiered",
            redis_url="redis://127.0.0.1:6379/9",
            etcd_endpoints="http://127.0.0.1:2379",
        )


class CountingStore:
    """The real store, counting the calls that reach it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if callable(attribute):
            self.calls.append(name)
        return attribute


class CountingSource:
    """A job source that counts the worker's takes (and passes them on)."""

    def __init__(self, source: StreamJobSource) -> None:
        self.source = source
        self.takes = 0
        self.changed = threading.Condition()

    def start(self, wake: Callable[[], None]) -> None:
        self.source.start(wake)

    def take(self, limit: int) -> Taken:
        taken = self.source.take(limit)
        with self.changed:
            self.takes += 1
            self.changed.notify_all()
        return taken

    def give_back(self, jobs: Any) -> set[int]:
        return self.source.give_back(jobs)

    def close(self) -> None:
        self.source.close()


def test_an_idle_tiered_worker_sends_nothing_to_the_database(app: App, redis_url: str) -> None:
    reader = open_reader(app.runtime(), ["default"], "idle-worker")
    source = StreamJobSource(app.runtime(), "idle-worker", reader, prefetch=4, block=0.2)
    takes = CountingSource(source)
    worker = chronoq.Worker(app, WorkerOptions(concurrency=2, poll_interval=0.05), source=takes)
    # Everything the worker and its source reach the database through, from here on.
    counting = CountingStore(app.store)
    source.store = counting  # type: ignore[assignment]
    app._store = counting  # type: ignore[assignment]
    thread = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        with takes.changed:
            assert takes.changed.wait_for(lambda: takes.takes >= 10, timeout=20)
    finally:
        calls = list(counting.calls)
        worker.request_stop()
        thread.join(timeout=20)
        app._store = counting._store
    assert calls == []


def test_a_partition_count_other_than_the_stores_is_refused(
    app: App, pg_dsn: str, redis_url: str, redis_prefix: str
) -> None:
    assert partition_count(app.runtime()) == PARTITIONS
    other = App(
        dsn=pg_dsn,
        dispatch="tiered",
        redis_url=redis_url,
        etcd_endpoints="http://127.0.0.1:2379",
        redis_prefix=redis_prefix,
        partitions=PARTITIONS * 2,
    )
    try:
        with pytest.raises(ConfigError, match=f"has {PARTITIONS} partitions"):
            chronoq.Worker(other, WorkerOptions(queues=["default"]))
    finally:
        other.close()


def test_a_partition_given_up_while_its_jobs_are_read_is_not_staged(
    app: App, redis_url: str
) -> None:
    """The stager reads PostgreSQL outside the lock; a partition the leader stopped leading
    meanwhile (a rebalance, a lost lease) must not be staged under its old epoch."""
    elector = StaticElector("leader", PARTITIONS)
    timers = RedisTimerStore(connect(redis_url), prefix=app.config.redis_prefix)
    options = TierOptions(partitions=PARTITIONS, horizon=30.0, step_interval=0.0)
    leader = TierLeader(app.runtime(), elector, timers, options, Observers())
    staged: list[int] = []
    stage = timers.stage
    read = app.store.job_stage_candidates

    def recorded(partition: int, epoch: int, batch: Any) -> int:
        staged.append(partition)
        return stage(partition, epoch, batch)

    def read_then_step_down(params: Any) -> Any:
        rows = read(params)
        elector.set_led([])
        leader.run_once()  # the mover's next step: it leads nothing now
        return rows

    timers.stage = recorded  # type: ignore[method-assign]
    try:
        leader.run_once()
        assert set(leader.partitions) == set(range(PARTITIONS))
        app.enqueue("add", {"a": 1, "b": 2})
        app.store.job_stage_candidates = read_then_step_down  # type: ignore[method-assign]
        leader.stage_once()
    finally:
        timers.close()
    # A step that trusts nothing suspends the partitions: kept (for a step that grants them
    # again under the same epoch), but none acted for.
    assert not leader.led.acting()
    assert staged == []
