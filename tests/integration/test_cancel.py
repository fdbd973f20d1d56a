"""Cancelling a running job: its worker learns of it from the next heartbeat of its lease and
stops the handler; the attempt ends cancelled, never retried, rescued or reported as lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import chronoq
from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.storage.base import JobRescueParams
from tests.helpers import RecordingSignals, running_worker, wait_until
from tests.services.tier import app_by_dispatch

# Heartbeats every 0.1 s: a cancel reaches the worker within a few of them.
LEASE = 0.3
# What a handler does between two looks at ctx.cancelled: a step of its own work.
WORK_STEP = 0.01
LOST_OR_RESCUED = ("the lease was lost", "rescued and claimed again", "is stale")


@pytest.fixture(params=["sqlite", "postgres", "tiered"])
def app(request: pytest.FixtureRequest) -> Iterator[chronoq.App]:
    """Each store with db dispatch, and PostgreSQL with tiered dispatch (the heartbeat and the
    reporter are the same whatever the source of the jobs)."""
    yield from app_by_dispatch(request)


@pytest.fixture
def worker_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="chronoq.worker")
    return caplog


def cancel(app: chronoq.App, job_id: int) -> Job:
    job = app.store.job_cancel(job_id)
    assert job is not None
    return job


def work_step() -> None:
    threading.Event().wait(WORK_STEP)


def assert_ended_cancelled(
    app: chronoq.App, job_id: int, worker: chronoq.Worker, signals: RecordingSignals
) -> Job:
    """One attempt, ended cancelled and accepted; the job stays cancelled and is not rescued."""
    assert [(job.id, outcome, accepted) for job, outcome, accepted in signals.finishes] == [
        (job_id, Outcome.CANCELLED, True)
    ]
    assert (worker.stats.cancelled, worker.stats.lost, worker.stats.retried) == (1, 0, 0)
    future = app.store.db_now() + timedelta(hours=1)
    rescued = app.store.job_rescue_expired(JobRescueParams(now=future))
    assert (rescued.requeued, rescued.dead) == ([], [])
    job = app.get_job(job_id)
    assert job is not None
    assert (job.status, job.attempts, job.locked_until) == (JobStatus.CANCELLED, 1, None)
    assert job.errors[-1]["error"] == "chronoq.errors.JobCancelled"
    assert job.errors[-1]["outcome"] == "cancelled"
    return job


def assert_logged_cancelled(log: pytest.LogCaptureFixture, job_id: int) -> None:
    lines = [r.getMessage() for r in log.records if r.name == "chronoq.worker"]
    assert any(f"job {job_id} " in line and "cancelled while running" in line for line in lines)
    assert any(line.startswith(f"job {job_id} ") and " cancelled after " in line for line in lines)
    assert not [line for line in lines if any(word in line for word in LOST_OR_RESCUED)]


def test_an_async_handler_is_cancelled_mid_await(
    app: chronoq.App, worker_log: pytest.LogCaptureFixture
) -> None:
    started = threading.Event()
    interrupted = threading.Event()
    runs: list[int] = []

    @app.task(lease=LEASE, max_attempts=3)
    async def waits(ctx: chronoq.JobContext) -> None:
        runs.append(ctx.attempt)
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            interrupted.set()
            raise

    job_id = waits.defer().id
    with running_worker(app) as (worker, signals):
        signals.wait_for(lambda: bool(signals.claims))
        wait_until(started.is_set)
        cancelled_at = time.monotonic()
        cancel(app, job_id)
        assert interrupted.wait(20)
        # Promptly: within a few heartbeats (each a third of the lease), not at the lease's end.
        assert time.monotonic() - cancelled_at < 10 * LEASE
        signals.wait_for(lambda: bool(signals.finishes))
        assert [job.id for job in signals.cancels] == [job_id]
    assert runs == [1]
    assert_ended_cancelled(app, job_id, worker, signals)
    assert_logged_cancelled(worker_log, job_id)


def test_an_async_handler_that_swallows_the_cancellation_is_still_cancelled(
    app: chronoq.App,
) -> None:
    started = threading.Event()

    @app.task(lease=LEASE)
    async def stubborn() -> str:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return "finished anyway"

    job_id = stubborn.defer().id
    with running_worker(app) as (worker, signals):
        wait_until(started.is_set)
        cancel(app, job_id)
        signals.wait_for(lambda: bool(signals.finishes))
    assert_ended_cancelled(app, job_id, worker, signals)


def test_a_sync_handler_polling_ctx_cancelled_stops(
    app: chronoq.App, worker_log: pytest.LogCaptureFixture
) -> None:
    started, stopped = threading.Event(), threading.Event()
    steps: list[int] = []

    @app.task(lease=LEASE)
    def polls(ctx: chronoq.JobContext) -> None:
        started.set()
        while not ctx.cancelled:
            steps.append(1)
            work_step()
        stopped.set()

    job_id = polls.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        cancel(app, job_id)
        assert stopped.wait(20)
        signals.wait_for(lambda: bool(signals.finishes))
    job = assert_ended_cancelled(app, job_id, worker, signals)
    assert "was cancelled while attempt 1 ran" in job.errors[-1]["message"]
    assert_logged_cancelled(worker_log, job_id)


def test_raise_if_cancelled_ends_the_attempt_cancelled_without_retry(app: chronoq.App) -> None:
    started = threading.Event()
    runs: list[int] = []

    @app.task(lease=LEASE, max_attempts=5, backoff=chronoq.Backoff(base=0.01, cap=0.02))
    def steps(ctx: chronoq.JobContext) -> None:
        runs.append(ctx.attempt)
        started.set()
        while True:
            ctx.raise_if_cancelled()
            work_step()

    job_id = steps.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        cancel(app, job_id)
        signals.wait_for(lambda: bool(signals.finishes))
    job = assert_ended_cancelled(app, job_id, worker, signals)
    assert "JobCancelled" in job.errors[-1]["traceback"]
    assert runs == [1]


def test_a_sync_handler_that_ignores_the_cancel_has_its_result_discarded(
    app: chronoq.App, worker_log: pytest.LogCaptureFixture
) -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @app.task(lease=LEASE, max_attempts=3)
    def ignores(ctx: chronoq.JobContext) -> str:
        runs.append(ctx.attempt)
        started.set()
        release.wait(30)
        return "done regardless"

    job_id = ignores.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        cancel(app, job_id)
        # The worker knows (from a heartbeat) before the handler returns.
        signals.wait_for(lambda: bool(signals.cancels))
        release.set()
        signals.wait_for(lambda: bool(signals.finishes))
    assert runs == [1]
    job = assert_ended_cancelled(app, job_id, worker, signals)
    assert job.fence_rejections == 0
    assert_logged_cancelled(worker_log, job_id)


def test_a_cancel_that_crosses_the_handlers_return_is_recorded_as_cancelled(
    app: chronoq.App, worker_log: pytest.LogCaptureFixture
) -> None:
    """The handler returns before any heartbeat could tell its worker (a long lease): the
    store refuses the result, and the worker records the attempt as cancelled, not lost."""
    started, release = threading.Event(), threading.Event()

    @app.task(lease=60.0)
    def quick() -> None:
        started.set()
        release.wait(30)

    job_id = quick.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        cancel(app, job_id)
        release.set()
        signals.wait_for(lambda: bool(signals.finishes))
        assert signals.cancels == []
    job = assert_ended_cancelled(app, job_id, worker, signals)
    assert "result (done) was discarded" in job.errors[-1]["message"]
    lines = [r.getMessage() for r in worker_log.records if r.name == "chronoq.worker"]
    assert not [line for line in lines if any(word in line for word in LOST_OR_RESCUED)]


def test_cancels_racing_completions_leave_every_job_consistent(
    app: chronoq.App, worker_log: pytest.LogCaptureFixture
) -> None:
    """Cancels sent while the handlers return: each job ends done (the cancel came too late,
    and says so) or cancelled (its attempt ended cancelled); none is lost, retried or run
    twice."""
    count = 12
    started = threading.Semaphore(0)
    release = threading.Event()
    runs: list[int] = []

    @app.task(lease=LEASE, max_attempts=3)
    def racing(ctx: chronoq.JobContext) -> None:
        runs.append(ctx.id)
        started.release()
        release.wait(30)

    ids = [racing.defer().id for _ in range(count)]
    answers: dict[int, JobStatus] = {}
    with running_worker(app, chronoq.WorkerOptions(concurrency=count)) as (worker, signals):
        for _ in ids:
            assert started.acquire(timeout=20)
        releaser = threading.Thread(target=release.set)
        releaser.start()
        for job_id in ids:
            answers[job_id] = cancel(app, job_id).status
        releaser.join()
        signals.wait_for(lambda: len(signals.finishes) == count)
    assert sorted(runs) == sorted(ids)
    assert all(accepted for _, _, accepted in signals.finishes)
    assert (worker.stats.lost, worker.stats.retried) == (0, 0)
    for job_id in ids:
        job = app.get_job(job_id)
        assert job is not None and job.attempts == 1
        if answers[job_id] is JobStatus.DONE:
            assert job.status is JobStatus.DONE  # finished before the cancel arrived
        else:
            assert answers[job_id] is JobStatus.CANCELLED
            assert job.status is JobStatus.CANCELLED
            assert job.errors[-1]["error"] == "chronoq.errors.JobCancelled"
    lines = [r.getMessage() for r in worker_log.records if r.name == "chronoq.worker"]
    assert not [line for line in lines if any(word in line for word in LOST_OR_RESCUED)]


def test_a_manual_heartbeat_of_a_cancelled_job_raises_job_cancelled(app: chronoq.App) -> None:
    started, cancelled_seen = threading.Event(), threading.Event()
    raised: list[type[BaseException]] = []

    @app.task(lease=60.0)
    def beats(ctx: chronoq.JobContext) -> None:
        started.set()
        cancelled_seen.wait(30)
        try:
            ctx.heartbeat()
        except chronoq.ChronoqError as exc:
            raised.append(type(exc))
            raise
        finally:
            assert ctx.cancelled

    job_id = beats.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        cancel(app, job_id)
        cancelled_seen.set()
        signals.wait_for(lambda: bool(signals.finishes))
    assert raised == [chronoq.JobCancelled]
    assert_ended_cancelled(app, job_id, worker, signals)


def test_a_cancelled_sync_handler_still_running_at_shutdown_is_reported_not_abandoned(
    app: chronoq.App,
) -> None:
    """Its thread cannot be stopped, but the job has no lease left to leave to the rescuer: its
    attempt is reported cancelled when the grace period ends."""
    started, release = threading.Event(), threading.Event()

    @app.task(lease=LEASE)
    def ignores() -> None:
        started.set()
        release.wait(30)

    job_id = ignores.defer().id
    options = chronoq.WorkerOptions(shutdown_grace=0.05)
    try:
        with running_worker(app, options) as (worker, signals):
            assert started.wait(20)
            cancel(app, job_id)
            signals.wait_for(lambda: bool(signals.cancels))
    finally:
        release.set()
    assert worker.stats.abandoned == 0
    assert_ended_cancelled(app, job_id, worker, signals)
