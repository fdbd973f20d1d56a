"""The tier when its parts die: scheduler processes SIGKILLed or SIGSTOPped, etcd members lost,
Redis restarted empty. Real PostgreSQL, Redis and a 3-member etcd cluster; jobs run by a tiered
worker in this process. Every scenario checks that no job is lost and none ran twice."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from chronoq import App, JobStatus, WorkerOptions
from chronoq.observability.events import (
    PartitionLeaderChanged,
    PartitionReconciled,
    TimersMoved,
)
from chronoq.observability.metrics import Metrics
from chronoq.tier.etcd import EtcdElector
from chronoq.tier.leader import TierLeader
from chronoq.tier.metrics import watch
from chronoq.tier.status import read_tier, status_reader
from tests.helpers import running_worker, wait_until
from tests.integration.cli_support import Spawner, run_cli
from tests.integration.test_tier import TierEvents, statuses
from tests.services.tier import leading

PARTITIONS = 4
TTL = 2.0

TIER_APP = """
import os

import chronoq

app = chronoq.App()


@app.task(lease=10.0)
def add(a: int, b: int) -> int:
    return a + b
"""


@pytest.fixture
def tier_env(
    pg_dsn: str, redis_url: str, redis_prefix: str, etcd_cluster: Any, etcd_prefix: str
) -> dict[str, str]:
    return {
        "CHRONOQ_DSN": pg_dsn,
        "CHRONOQ_DISPATCH": "tiered",
        "CHRONOQ_REDIS_URL": redis_url,
        "CHRONOQ_ETCD_ENDPOINTS": ",".join(etcd_cluster.endpoints),
        "CHRONOQ_REDIS_PREFIX": redis_prefix,
        "CHRONOQ_PARTITIONS": str(PARTITIONS),
        "CHRONOQ_LEADER_TTL": str(TTL),
        "CHRONOQ_STAGE_HORIZON": "30",
    }


@pytest.fixture
def tier_app(tier_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    for name, value in tier_env.items():
        monkeypatch.setenv(name, value)
    app = App()

    @app.task(lease=10.0)
    def add(a: int, b: int) -> int:
        return a + b

    yield app
    app.close()


def _schedulers(spawner: Spawner, write_app: Any, env: dict[str, str], count: int) -> list[Any]:
    spec = write_app(TIER_APP)
    return [spawner.start("scheduler", "--app", spec, env=env) for _ in range(count)]


def _pid(holder: str) -> int:
    return int(holder.split(":")[1])


def _led_by(app: App, holders: int) -> dict[int, str] | None:
    """partition -> holder once every partition is led, by `holders` distinct processes."""
    view = read_tier(app.runtime())
    led = {p.partition: p.leader for p in view.partitions if p.leader is not None}
    if len(led) == PARTITIONS and len(set(led.values())) == holders:
        return {partition: str(holder) for partition, holder in led.items()}
    return None


def _all_done_once(app: App, ids: list[int]) -> None:
    jobs = [app.get_job(job_id) for job_id in ids]
    assert all(job is not None and job.status == JobStatus.DONE for job in jobs)
    assert [job.attempts for job in jobs if job is not None] == [1] * len(ids)


def test_a_killed_leaders_partitions_fire_within_ttl_plus_one_second(
    tier_app: App, tier_env: dict[str, str], spawner: Spawner, write_app: Any
) -> None:
    _schedulers(spawner, write_app, tier_env, 2)
    leaders = wait_until(lambda: _led_by(tier_app, 2), what="4 partitions led by 2 schedulers")
    victim = leaders[0]
    orphaned = {p for p, holder in leaders.items() if holder == victim}
    with running_worker(tier_app, WorkerOptions(concurrency=8)):
        ids = [
            tier_app.enqueue("add", {"a": n, "b": 1}, delay=timedelta(seconds=0.5)).id
            for n in range(40)
        ]
        os.kill(_pid(victim), signal.SIGKILL)
        wait_until(lambda: set(statuses(tier_app, ids)) == {JobStatus.DONE}, what="all jobs done")
    _all_done_once(tier_app, ids)
    late = [
        (job.started_at - job.run_at).total_seconds()
        for job in (tier_app.get_job(job_id) for job_id in ids)
        if job is not None and job.started_at is not None and job.id % PARTITIONS in orphaned
    ]
    assert late, "no job fell in the killed leader's partitions"
    assert max(late) <= TTL + 1.0, f"lateness after the failover: {sorted(late)[-3:]}"
    survivor = wait_until(lambda: _led_by(tier_app, 1), what="the survivor leads everything")
    assert victim not in survivor.values()


def test_a_leader_paused_past_its_ttl_leads_nothing_when_resumed(
    tier_app: App, tier_env: dict[str, str], spawner: Spawner, write_app: Any
) -> None:
    processes = _schedulers(spawner, write_app, tier_env, 2)
    leaders = wait_until(lambda: _led_by(tier_app, 2), what="4 partitions led by 2 schedulers")
    paused = leaders[0]
    process = next(p for p in processes if p.pid == _pid(paused))
    with running_worker(tier_app, WorkerOptions(concurrency=8)):
        os.kill(process.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: _led_by(tier_app, 1), what="the other scheduler leads everything")
            ids = [tier_app.enqueue("add", {"a": n, "b": 2}).id for n in range(40)]
        finally:
            os.kill(process.pid, signal.SIGCONT)
        wait_until(
            lambda: "stopped leading partition" in spawner.log(process),
            what=f"the resumed scheduler steps down: {spawner.log(process)}",
        )
        more = [tier_app.enqueue("add", {"a": n, "b": 3}).id for n in range(20)]
        wait_until(lambda: set(statuses(tier_app, ids + more)) == {JobStatus.DONE}, what="done")
    _all_done_once(tier_app, ids + more)


@pytest.fixture
def etcd_leader(
    tier_app: App, etcd_cluster: Any, redis_url: str
) -> Iterator[tuple[TierLeader, TierEvents]]:
    """A tier leader in this process, elected in etcd (so the test can watch its events)."""
    events = TierEvents(kinds=(TimersMoved, PartitionLeaderChanged, PartitionReconciled))
    elector = etcd_elector(tier_app, etcd_cluster)
    with leading(tier_app, redis_url, elector, [events], TTL / 10) as leader:
        yield leader, events


def etcd_elector(app: App, etcd_cluster: Any, holder: str = "in-process") -> EtcdElector:
    return EtcdElector(
        etcd_cluster.endpoints, holder, PARTITIONS, ttl=TTL, prefix=app.config.redis_prefix
    )


def _leading(events: TierEvents) -> set[int]:
    led: set[int] = set()
    for change in events.of(PartitionLeaderChanged):
        (led.add if change.epoch is not None else led.discard)(change.partition)
    return led


def test_one_etcd_member_lost_changes_nothing(
    tier_app: App, etcd_cluster: Any, etcd_leader: tuple[TierLeader, TierEvents]
) -> None:
    _, events = etcd_leader
    wait_until(lambda: _leading(events) == set(range(PARTITIONS)), what="every partition led")
    changes = len(events.of(PartitionLeaderChanged))
    etcd_cluster.kill(etcd_cluster.follower_index())
    with running_worker(tier_app, WorkerOptions(concurrency=8)):
        ids = [tier_app.enqueue("add", {"a": n, "b": 4}).id for n in range(30)]
        wait_until(lambda: set(statuses(tier_app, ids)) == {JobStatus.DONE}, what="all done")
    _all_done_once(tier_app, ids)
    assert len(events.of(PartitionLeaderChanged)) == changes, "a leader changed"


def test_quorum_lost_moves_nothing_until_it_returns(
    tier_app: App, etcd_cluster: Any, etcd_leader: tuple[TierLeader, TierEvents]
) -> None:
    _, events = etcd_leader
    wait_until(lambda: _leading(events) == set(range(PARTITIONS)), what="every partition led")
    lost = [i for i in range(3) if i != etcd_cluster.leader_index()]
    for i in lost:
        etcd_cluster.kill(i)
    events.wait_for(lambda: not _leading(events), timeout=TTL * 3)
    with running_worker(tier_app, WorkerOptions(concurrency=8)):
        moved_before = len(events.of(TimersMoved))
        ids = [tier_app.enqueue("add", {"a": n, "b": 5}).id for n in range(30)]
        # Nothing leads, so nothing moves: the jobs wait in PostgreSQL.
        assert set(statuses(tier_app, ids)) == {JobStatus.PENDING}
        assert len(events.of(TimersMoved)) == moved_before
        for i in lost:
            etcd_cluster.restart(i)
        wait_until(lambda: set(statuses(tier_app, ids)) == {JobStatus.DONE}, what="all done")
    _all_done_once(tier_app, ids)


def test_redis_restarted_empty_reconciles_and_every_job_runs(
    tier_app: App, private_redis: Any, etcd_cluster: Any
) -> None:
    tier_app.config = tier_app.config.__class__.load(redis_url=private_redis.url)
    events = TierEvents(kinds=(TimersMoved, PartitionReconciled))
    elector = etcd_elector(tier_app, etcd_cluster)
    with leading(tier_app, private_redis.url, elector, [events], TTL / 10):
        with running_worker(tier_app, WorkerOptions(concurrency=8)):
            first = [tier_app.enqueue("add", {"a": n, "b": 6}).id for n in range(20)]
            wait_until(lambda: set(statuses(tier_app, first)) == {JobStatus.DONE}, what="first")
            later = [
                tier_app.enqueue("add", {"a": n, "b": 7}, delay=timedelta(seconds=1)).id
                for n in range(40)
            ]
            private_redis.restart()
            wait_until(lambda: set(statuses(tier_app, later)) == {JobStatus.DONE}, what="later")
        events.wait_for(lambda: bool(events.of(PartitionReconciled)))
    _all_done_once(tier_app, first + later)
    seconds = [r.seconds for r in events.of(PartitionReconciled)]
    assert seconds and max(seconds) < TTL * 5, seconds


def test_tier_status_shows_the_partitions_and_their_leader(
    tier_app: App, etcd_leader: tuple[TierLeader, TierEvents]
) -> None:
    _, events = etcd_leader
    wait_until(lambda: _leading(events) == set(range(PARTITIONS)), what="every partition led")
    tier_app.enqueue("add", {"a": 1, "b": 1}, delay=timedelta(seconds=20))

    def staged() -> dict[str, Any] | None:
        result = run_cli("tier", "status", "--json")
        assert result.code == 0, result.err
        view: dict[str, Any] = result.json()
        return view if sum(p["staged"] for p in view["partitions"]) == 1 else None

    view = wait_until(staged, what="one staged timer in tier status")
    assert view["dispatch"] == "tiered"
    assert view["schedulers"] == ["in-process"]
    assert [p["leader"] for p in view["partitions"]] == ["in-process"] * PARTITIONS
    assert all(p["epoch"] > 0 for p in view["partitions"])
    table = run_cli("tier", "status")
    assert table.code == 0 and "4 partitions, 4 led" in table.out


def test_tier_status_names_an_unreachable_etcd(
    tier_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONOQ_ETCD_ENDPOINTS", "http://127.0.0.1:1")
    result = run_cli("tier", "status")
    assert result.code == 1
    assert "etcd:" in result.err and "Traceback" not in result.err


def test_metrics_count_the_tier_and_read_its_partitions(
    tier_app: App, etcd_cluster: Any, redis_url: str
) -> None:
    metrics = Metrics()
    watch(metrics, status_reader(tier_app.runtime()))
    elector = etcd_elector(tier_app, etcd_cluster, "metrics")
    with (
        leading(tier_app, redis_url, elector, [metrics], TTL / 10),
        running_worker(tier_app, WorkerOptions(concurrency=4)),
    ):
        ids = [tier_app.enqueue("add", {"a": n, "b": 8}).id for n in range(12)]
        wait_until(lambda: set(statuses(tier_app, ids)) == {JobStatus.DONE}, what="done")
    text = metrics.render().decode()
    moved = sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("chronoq_tier_timers_moved_total{")
    )
    assert moved >= 12
    assert 'chronoq_tier_leader_changes_total{partition="0"}' in text
    assert "chronoq_tier_up 1.0" in text
    assert 'chronoq_tier_stream_lag{partition="3"}' in text


def _one_line_failure(spawner: Spawner, process: Any) -> str:
    assert spawner.wait(process, timeout=30) != 0
    log = spawner.log(process)
    assert "Traceback" not in log, log
    return log


def test_a_scheduler_that_cannot_reach_etcd_says_so_at_start(
    tier_env: dict[str, str], spawner: Spawner, write_app: Any
) -> None:
    env = tier_env | {"CHRONOQ_ETCD_ENDPOINTS": "http://127.0.0.1:1,http://127.0.0.1:2"}
    [process] = _schedulers(spawner, write_app, env, 1)
    assert "etcd cannot be reached" in _one_line_failure(spawner, process)


def test_a_tiered_worker_that_cannot_reach_redis_says_so_at_start(
    tier_env: dict[str, str], spawner: Spawner, write_app: Any
) -> None:
    env = tier_env | {"CHRONOQ_REDIS_URL": "redis://127.0.0.1:1/0"}
    process = spawner.start("worker", "--app", write_app(TIER_APP), env=env)
    assert "Redis not reachable at redis://127.0.0.1:1/0" in _one_line_failure(spawner, process)


def test_tiered_dispatch_without_redis_and_etcd_names_both(
    tier_env: dict[str, str], spawner: Spawner, write_app: Any
) -> None:
    env = tier_env | {"CHRONOQ_REDIS_URL": "", "CHRONOQ_ETCD_ENDPOINTS": ""}
    process = spawner.start("worker", "--app", write_app(TIER_APP), env=env)
    log = _one_line_failure(spawner, process)
    assert "redis_url" in log and "etcd_endpoints" in log, log


def test_migrate_with_tiered_dispatch_fixes_the_partition_count(
    tier_app: App, tier_env: dict[str, str]
) -> None:
    result = run_cli("migrate")
    assert result.code == 0, result.err
    assert f"tiered dispatch: {PARTITIONS} partitions" in result.err
    assert tier_app.store.tier_partitions(64) == PARTITIONS
