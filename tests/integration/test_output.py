"""Job output, `App.wait` and progress, with real workers over SQLite, PostgreSQL and tiered
dispatch."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import chronoq
import chronoq.waiting
from chronoq.core.jobs import JobProgress, JobStatus, Outcome
from chronoq.storage.base import JobClaimParams, JobFinishParams, JobRescueParams
from tests.helpers import running_worker, wait_until
from tests.services.tier import app_by_dispatch

DEADLINE = 30.0
FAST = chronoq.Backoff(base=0.01, cap=0.02)


@pytest.fixture(params=["sqlite", "postgres", "tiered"])
def app(request: pytest.FixtureRequest) -> Any:
    yield from app_by_dispatch(request)


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher's listen slice made an hour long: a wait that returns within the test's
    deadline was woken by the store's notification, not by a slice running out."""
    monkeypatch.setattr(chronoq.waiting, "LISTEN_SLICE", 3600.0)


def test_a_handlers_return_value_is_the_jobs_output(app: chronoq.App) -> None:
    @app.task
    def count(ctx: chronoq.JobContext, n: int) -> dict[str, Any]:
        return {"job": ctx.id, "squares": [i * i for i in range(n)], "name": "ü"}

    @app.task(queue="other")
    async def shout(word: str) -> str:
        await asyncio.sleep(0)
        return word.upper()

    @app.task(queue="third")
    def quiet() -> None:
        return None

    counted, shouted, quieted = count.defer(n=4).id, shout.defer(word="hi").id, quiet.defer().id
    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.finishes) == 3)
    job = app.get_job(counted)
    assert job is not None and job.status is JobStatus.DONE
    assert job.output == {"job": counted, "squares": [0, 1, 4, 9], "name": "ü"}
    assert app.wait(shouted, timeout=0) == "HI"
    assert app.wait(quieted, timeout=0) is None


def test_wait_is_woken_by_the_completion(app: chronoq.App, no_fallback: None) -> None:
    """A waiter blocked on a running job returns its output once the job completes: woken by
    the notification (the listen slice is an hour), on a thread of its own."""
    release = threading.Event()

    @app.task
    def slow() -> list[int]:
        release.wait(DEADLINE)
        return [1, 2, 3]

    job_id = slow.defer().id
    results: list[object] = []
    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        waiter = threading.Thread(
            target=lambda: results.append(app.wait(job_id, timeout=DEADLINE * 2)), daemon=True
        )
        waiter.start()
        assert results == []  # the job is still running: nothing to return yet
        release.set()
        waiter.join(DEADLINE)
        assert not waiter.is_alive(), "the waiter was not woken by the completion"
    assert results == [[1, 2, 3]]


def test_wait_async_is_woken_by_the_completion(app: chronoq.App, no_fallback: None) -> None:
    release = threading.Event()

    @app.task
    def slow() -> str:
        release.wait(DEADLINE)
        return "done"

    job_id = slow.defer().id

    async def waiting() -> object:
        pending = asyncio.create_task(app.wait_async(job_id, timeout=DEADLINE * 2))
        await asyncio.sleep(0)
        assert not pending.done()
        release.set()
        return await asyncio.wait_for(pending, DEADLINE)

    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        assert asyncio.run(waiting()) == "done"


def test_wait_raises_the_final_error_of_a_dead_job(app: chronoq.App, no_fallback: None) -> None:
    @app.task(max_attempts=2, backoff=FAST)
    def broken() -> None:
        raise ValueError("upstream said no")

    job_id = broken.defer().id
    options = chronoq.WorkerOptions(poll_interval=0.2)
    with running_worker(app, options), pytest.raises(chronoq.JobFailed) as failed:
        app.wait(job_id, timeout=DEADLINE)
    assert failed.value.job.id == job_id
    assert failed.value.job.status is JobStatus.DEAD
    assert failed.value.error is not None
    assert failed.value.error["error"] == "ValueError"
    assert failed.value.error["message"] == "upstream said no"
    assert "after attempt 2: ValueError: upstream said no" in str(failed.value)
    assert isinstance(failed.value, chronoq.JobNotDone)


def test_wait_tells_a_cancelled_job_and_a_timeout_apart(app: chronoq.App) -> None:
    @app.task
    def later() -> int:
        return 1

    cancelled = later.configure(delay="1h").defer().id
    pending = later.configure(delay="1h").defer().id
    with pytest.raises(chronoq.WaitTimeout) as timed_out:
        app.wait(pending, timeout=0)
    assert (timed_out.value.job_id, timed_out.value.status) == (pending, "pending")
    assert isinstance(timed_out.value, TimeoutError)
    waiter_error: list[BaseException] = []

    def wait() -> None:
        try:
            app.wait(cancelled, timeout=DEADLINE)
        except BaseException as exc:  # inspected below
            waiter_error.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    app.store.job_cancel(cancelled)
    waiter.join(DEADLINE)
    assert not waiter.is_alive()
    [error] = waiter_error
    assert isinstance(error, chronoq.JobWasCancelled)
    assert error.job.status is JobStatus.CANCELLED
    with pytest.raises(chronoq.JobNotFound):
        app.wait(10**9, timeout=0)
    with pytest.raises(ValueError, match="timeout must be None or a number"):
        app.wait(pending, timeout=-1)


def test_wait_async_times_out_as_a_wait_timeout(app: chronoq.App) -> None:
    @app.task
    def later() -> None:
        pass

    job_id = later.configure(delay="1h").defer().id
    with pytest.raises(chronoq.WaitTimeout):
        asyncio.run(app.wait_async(job_id, timeout=0.05))


def test_a_stale_workers_output_is_discarded_with_its_completion(app: chronoq.App) -> None:
    """The lease lapses while the first attempt runs and the job is claimed again: the stale
    attempt's completion and its output are refused, the newer attempt's output stays."""
    release = threading.Event()

    @app.task(lease=0.3)
    def stalls(ctx: chronoq.JobContext) -> dict[str, int]:
        if ctx.attempt == 1:
            release.wait(DEADLINE)
        return {"attempt": ctx.attempt}

    job_id = stalls.defer().id
    options = chronoq.WorkerOptions(poll_interval=0.1, rescue_interval=0.1)
    with running_worker(app, options) as (_, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        future = app.store.db_now() + timedelta(seconds=1)
        assert app.store.job_rescue_expired(JobRescueParams(now=future)).requeued == [job_id]
        signals.wait_for(lambda: any(ok for _, _, ok in signals.finishes))
        assert app.wait(job_id, timeout=0) == {"attempt": 2}
        release.set()
        signals.wait_for(lambda: len(signals.finishes) == 2)
    assert sorted((job.lease_token, ok) for job, _, ok in signals.finishes) == [
        (1, False),
        (2, True),
    ]
    job = app.get_job(job_id)
    assert job is not None and job.output == {"attempt": 2}


def test_an_output_over_the_limit_fails_the_attempt_and_retries(dsn: str) -> None:
    with chronoq.App(dsn, output_limit=64) as app:

        @app.task(max_attempts=3, backoff=FAST)
        def big(ctx: chronoq.JobContext) -> str:
            return "x" * (100 if ctx.attempt == 1 else 10)

        job_id = big.defer().id
        with running_worker(app, chronoq.WorkerOptions(poll_interval=0.2)):
            assert app.wait(job_id, timeout=DEADLINE) == "x" * 10
        job = app.get_job(job_id)
    assert job is not None and job.attempts == 2
    [error] = job.errors
    assert error["error"] == "chronoq.errors.OutputTooLarge"
    assert error["outcome"] == "retry"
    assert "is 102 bytes as JSON; the output limit is 64 bytes" in error["message"]


def test_the_workers_output_limit_overrides_the_apps(dsn: str) -> None:
    with chronoq.App(dsn) as app:

        @app.task(max_attempts=1)
        def big() -> str:
            return "y" * 50

        job_id = big.defer().id
        options = chronoq.WorkerOptions(output_limit=20, poll_interval=0.2)
        with running_worker(app, options), pytest.raises(chronoq.JobFailed) as failed:
            app.wait(job_id, timeout=DEADLINE)
    assert failed.value.error is not None
    assert "the output limit is 20 bytes" in failed.value.error["message"]


def test_a_return_value_that_is_not_json_fails_the_attempt(dsn: str) -> None:
    with chronoq.App(dsn) as app:

        @app.task(max_attempts=1)
        def odd() -> object:
            return {"when": object()}

        @app.task(max_attempts=1)
        def nan() -> float:
            return float("nan")

        odd_id, nan_id = odd.defer().id, nan.defer().id
        with running_worker(app, chronoq.WorkerOptions(poll_interval=0.2)) as (_, signals):
            signals.wait_for(lambda: len(signals.finishes) == 2)
        assert {o for _, o, _ in signals.finishes} == {Outcome.DEAD}
        for job_id in (odd_id, nan_id):
            job = app.get_job(job_id)
            assert job is not None and job.output is None
            assert job.errors[0]["error"] == "chronoq.errors.InvalidOutput"
            assert "is not JSON" in job.errors[0]["message"]


def test_complete_in_stores_the_output_it_is_given(sqlite_dsn: str) -> None:
    import sqlite3

    from chronoq.storage.dsn import sqlite_path

    with chronoq.App(sqlite_dsn) as app:

        @app.task
        def in_tx(ctx: chronoq.JobContext) -> str:
            conn = sqlite3.connect(sqlite_path(sqlite_dsn), timeout=DEADLINE)
            try:
                ctx.complete_in(conn, output={"rows": 3})
                conn.commit()
            finally:
                conn.close()
            return "not stored"

        job_id = in_tx.defer().id
        with running_worker(app):
            assert app.wait(job_id, timeout=DEADLINE) == {"rows": 3}


def test_progress_reaches_the_job_with_a_heartbeat(app: chronoq.App) -> None:
    release = threading.Event()
    reported = threading.Event()

    @app.task(lease=0.6)
    def files(ctx: chronoq.JobContext) -> None:
        ctx.progress(0.4, note="3 of 8 files")
        reported.set()
        release.wait(DEADLINE)

    job_id = files.defer().id
    with running_worker(app) as (_, signals):
        assert reported.wait(DEADLINE)
        running = wait_until(
            lambda: (job := app.get_job(job_id)) is not None and job.progress is not None and job,
            DEADLINE,
            "the heartbeat to store the progress",
        )
        assert (running.progress, running.progress_note) == (0.4, "3 of 8 files")
        assert running.status is JobStatus.RUNNING
        release.set()
        signals.wait_for(lambda: len(signals.finishes) == 1)
    done = app.get_job(job_id)
    assert done is not None and done.progress == 0.4


def test_bad_progress_fails_the_attempt_with_a_clear_error(app: chronoq.App) -> None:
    @app.task(max_attempts=1)
    def wrong(ctx: chronoq.JobContext) -> None:
        ctx.progress(40)

    job_id = wrong.defer().id
    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.finishes) == 1)
    job = app.get_job(job_id)
    assert job is not None and job.status is JobStatus.DEAD
    assert job.errors[0]["message"] == "progress must be a number from 0 to 1, got 40"
    assert job.progress is None


def test_job_progress_is_exported() -> None:
    assert chronoq.JobProgress(0.5, "half") == JobProgress(0.5, "half")


def _listening_backends(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE '%%LISTEN chronoq_jobs_finished'"
        ).fetchall()
    return [row[0] for row in rows]


def test_a_waiter_survives_the_loss_of_the_listening_connection(
    pg_dsn: str, no_fallback: None
) -> None:
    """The listening connection is killed while a wait blocks: the waiter listens again on a
    new connection, and the completion still wakes it."""
    with chronoq.App(pg_dsn) as app:
        job_id = app.enqueue("t", {}, queue="q").id
        results: list[object] = []
        waiter = threading.Thread(
            target=lambda: results.append(app.wait(job_id, timeout=DEADLINE * 2)), daemon=True
        )
        waiter.start()
        [first] = wait_until(lambda: _listening_backends(pg_dsn), DEADLINE, "a listener")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (first,))
        wait_until(
            lambda: [pid for pid in _listening_backends(pg_dsn) if pid != first],
            DEADLINE,
            "a new listener",
        )
        [job] = app.store.job_claim_with_wakeup(JobClaimParams(["q"], 1, "w")).jobs
        done = JobFinishParams(job.id, job.lease_token, Outcome.DONE, output_json='"again"')
        assert app.store.job_finish_many([done]) == {job_id}
        waiter.join(DEADLINE)
        assert not waiter.is_alive()
    assert results == ["again"]
