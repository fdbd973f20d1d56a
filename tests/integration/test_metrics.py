"""Metrics against real stores: what a drained workload counts, lost leases and fenced writes,
the rescuer, and the scheduler's schedule and leadership counters."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import chronoq
from chronoq.observability.metrics import Metrics
from chronoq.scheduler.runner import Scheduler
from chronoq.scheduler.services import LeaseRescuer
from chronoq.storage.base import JobClaimParams, JobRescueParams, LeaderTerm
from chronoq.testing import SchedulerSignals, StaticElector, fire_schedules
from tests.helpers import running_worker, wait_until
from tests.integration.test_schedules import rewind


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    with chronoq.App(dsn) as application:
        application.metrics = Metrics()
        yield application


def metric(app: chronoq.App, name: str, **labels: str) -> float:
    assert app.metrics is not None
    return app.metrics.registry.get_sample_value(name, labels) or 0.0


def burst(app: chronoq.App, **options: Any) -> chronoq.WorkerStats:
    return chronoq.Worker(app, chronoq.WorkerOptions(burst=True, **options)).run(
        install_signal_handlers=False
    )


def test_a_drained_workload_counts_each_queue_and_task(app: chronoq.App) -> None:
    @app.task(queue="mail")
    def send(n: int) -> None:
        pass

    @app.task(queue="mail", max_attempts=3)
    def flaky(ctx: chronoq.JobContext) -> None:
        if ctx.attempt == 1:
            raise chronoq.Retry(delay=0)

    @app.task(queue="web", max_attempts=1)
    def boom() -> None:
        raise ValueError("no")

    @app.task(queue="web")
    def drop() -> None:
        raise chronoq.Discard("not wanted")

    @app.task(queue="web")
    async def ping() -> None:
        pass

    send.configure(key="once").defer(n=0)
    assert not send.configure(key="once").defer(n=0).created  # a live job held the key: not counted
    app.enqueue_many([chronoq.JobSpec("send", {"n": n}) for n in (1, 2, 3)])  # streamed
    app.enqueue_many([chronoq.JobSpec("send", {"n": 4}, key="four")])  # keyed: one insert
    flaky.defer()
    boom.defer()
    drop.defer()
    asyncio.run(app.enqueue_async("ping"))
    stats = burst(app)
    assert (stats.done, stats.retried, stats.dead, stats.cancelled) == (7, 1, 1, 1)

    def counts(task: str, queue: str) -> tuple[float, ...]:
        names = ("enqueued", "claimed", "completed", "retried", "dead", "cancelled", "skipped")
        return tuple(metric(app, f"chronoq_jobs_{n}_total", queue=queue, task=task) for n in names)

    assert counts("send", "mail") == (5, 5, 5, 0, 0, 0, 0)
    assert counts("flaky", "mail") == (1, 2, 1, 1, 0, 0, 0)
    assert counts("boom", "web") == (1, 1, 0, 0, 1, 0, 0)
    assert counts("drop", "web") == (1, 1, 0, 0, 0, 1, 0)
    assert counts("ping", "web") == (1, 1, 1, 0, 0, 0, 0)
    for queue, attempts in (("mail", 7), ("web", 3)):
        assert metric(app, "chronoq_job_lateness_seconds_count", queue=queue) == attempts
        assert metric(app, "chronoq_job_run_seconds_count", queue=queue) == attempts
        assert metric(app, "chronoq_job_lateness_seconds_sum", queue=queue) >= 0
    assert metric(app, "chronoq_fencing_rejections_total", kind="finish") == 0


def test_a_lost_lease_counts_its_refused_heartbeat_and_result_once(app: chronoq.App) -> None:
    held: list[chronoq.JobContext] = []
    release = threading.Event()

    @app.task(lease=0.3)
    def stalls(ctx: chronoq.JobContext) -> None:
        if ctx.attempt == 1:
            held.append(ctx)
            release.wait(30)

    job_id = stalls.defer().id
    # One slot, held by the stalled handler: the worker cannot claim the job again meanwhile.
    options = chronoq.WorkerOptions(concurrency=1, poll_interval=0.1, rescue_interval=60)
    with running_worker(app, options) as (worker, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        future = app.store.db_now() + timedelta(seconds=1)
        assert app.store.job_rescue_expired(JobRescueParams(now=future)).requeued == [job_id]
        wait_until(lambda: held and held[0].lost, what="the heartbeater to find the lease lost")
        release.set()
        signals.wait_for(lambda: any(accepted for _, _, accepted in signals.finishes))
    assert worker.stats.lost == 1
    assert metric(app, "chronoq_fencing_rejections_total", kind="heartbeat") == 1
    assert metric(app, "chronoq_fencing_rejections_total", kind="finish") == 1
    assert metric(app, "chronoq_lease_expiries_total", source="worker") == 1
    assert metric(app, "chronoq_jobs_claimed_total", queue="default", task="stalls") == 2
    assert metric(app, "chronoq_jobs_completed_total", queue="default", task="stalls") == 1


def test_a_handlers_own_stale_writes_are_fencing_rejections(app: chronoq.App) -> None:
    @app.task(max_attempts=2)
    def taken_over(ctx: chronoq.JobContext) -> None:
        # Another worker takes the job over while this attempt runs: its lease is rescued on a
        # pinned future clock, and the job claimed again.
        future = app.store.db_now() + timedelta(hours=1)
        app.store.job_rescue_expired(JobRescueParams(now=future))
        [thief] = app.store.job_claim_with_wakeup(JobClaimParams(["default"], 1, "thief:0:0")).jobs
        assert thief.lease_token == ctx.lease_token + 1
        ctx.heartbeat()  # raises JobLost

    taken_over.defer()
    stats = burst(app, concurrency=1)
    assert stats.lost == 1
    assert metric(app, "chronoq_fencing_rejections_total", kind="heartbeat") == 1
    assert metric(app, "chronoq_fencing_rejections_total", kind="finish") == 1
    assert metric(app, "chronoq_lease_expiries_total", source="worker") == 1


@pytest.mark.parametrize("rescuer", ["scheduler", "worker"])
def test_leases_the_rescuer_ends_are_counted(app: chronoq.App, rescuer: str) -> None:
    @app.task(max_attempts=1)
    def once() -> None:
        pass

    @app.task
    def again() -> None:
        pass

    # Claimed an hour ago by a worker that died: both leases ran out long ago.
    hour_ago = app.store.db_now() - timedelta(hours=1)
    once.configure(run_at=hour_ago - timedelta(minutes=1)).defer()
    again.configure(run_at=hour_ago - timedelta(minutes=1)).defer()
    claim = JobClaimParams(["default"], 10, "gone:0:0", now=hour_ago)
    assert len(app.store.job_claim_with_wakeup(claim).jobs) == 2
    if rescuer == "scheduler":
        LeaseRescuer(app.runtime()).run_once()
    else:
        assert burst(app).rescued == 2
    assert metric(app, "chronoq_lease_expiries_total", source="rescuer") == 2


def test_schedule_counters_follow_the_cron_passes(app: chronoq.App) -> None:
    @app.task(queue="reports")
    def report() -> None:
        pass

    now = app.store.db_now()
    for name, misfire in (("runs-late", "run_late"), ("skips", "skip")):
        spec = app.schedule_spec(
            name=name, cadence="* * * * *", task="report", misfire=misfire, misfire_grace="90s"
        )
        app.add_schedule(spec)
        rewind(app, name, now - timedelta(minutes=30))
    fired = fire_schedules(app)
    totals = 0.0
    for name in ("runs-late", "skips"):
        schedule = app.store.schedule_get(name)
        assert schedule is not None
        assert metric(app, "chronoq_schedule_fires_total", schedule=name) == schedule.fired
        assert metric(app, "chronoq_schedule_late_ticks_total", schedule=name) == schedule.late
        skipped = metric(app, "chronoq_schedule_skipped_ticks_total", schedule=name)
        assert skipped == schedule.skipped
        totals += schedule.fired
    assert totals == fired
    assert metric(app, "chronoq_schedule_late_ticks_total", schedule="runs-late") >= 28
    assert metric(app, "chronoq_schedule_skipped_ticks_total", schedule="skips") >= 28


class _Leadership(SchedulerSignals):
    def __init__(self) -> None:
        self.elected_once = threading.Event()

    def elected(self, term: LeaderTerm) -> None:
        self.elected_once.set()


def test_a_scheduler_counts_being_elected_and_stepping_down(app: chronoq.App) -> None:
    signals = _Leadership()
    scheduler = Scheduler(app, elector=StaticElector(), observers=[signals])
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        assert signals.elected_once.wait(20), "the scheduler was never elected"
        assert metric(app, "chronoq_leader", duty="scheduler") == 1
        assert metric(app, "chronoq_leader_changes_total", duty="scheduler") == 1
    finally:
        scheduler.request_stop()
        thread.join(20)
    assert not thread.is_alive()
    assert metric(app, "chronoq_leader", duty="scheduler") == 0
    assert metric(app, "chronoq_leader_changes_total", duty="scheduler") == 2
