"""The worker against real stores: running, retrying, dead-lettering, leases and shutdown."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import chronoq
import chronoq.testing
from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import JobInsertParams, JobRescueParams
from tests.helpers import running_worker, wait_until
from tests.services.tier import app_by_dispatch

FAST = chronoq.Backoff(base=0.01, cap=0.02)


def burst(app: chronoq.App, **options: Any) -> chronoq.WorkerStats:
    no_burst_when_tiered(app)
    return chronoq.Worker(app, chronoq.WorkerOptions(burst=True, **options)).run(
        install_signal_handlers=False
    )


@pytest.fixture(params=["sqlite", "postgres", "tiered", "tiered-cluster"])
def app(request: pytest.FixtureRequest) -> Any:
    """Each store with db dispatch, and PostgreSQL with tiered dispatch (a partition leader
    moves the jobs onto Redis Streams, the worker reads them), on one Redis and on a Redis
    Cluster."""
    yield from app_by_dispatch(request)


def no_burst_when_tiered(app: chronoq.App) -> None:
    if app.config.dispatch == "tiered":
        pytest.skip("burst mode drains the jobs table; tiered workers refuse it")


def test_sync_and_async_handlers_run_with_their_payload(app: chronoq.App) -> None:
    seen: list[tuple[str, int, int]] = []

    @app.task
    def add(ctx: chronoq.JobContext, a: int, b: int) -> None:
        seen.append(("sync", ctx.attempt, a + b))

    @app.task(queue="other")
    async def mul(a: int, b: int) -> None:
        await asyncio.sleep(0)
        seen.append(("async", 1, a * b))

    add.defer(a=2, b=3)
    mul.defer(a=2, b=3)
    stats = burst(app)
    assert sorted(seen) == [("async", 1, 6), ("sync", 1, 5)]
    assert stats.done == 2
    assert {s.status for s in app.store.stats()} == {JobStatus.DONE}


def test_failures_retry_with_backoff_then_dead_with_full_history(app: chronoq.App) -> None:
    @app.task(max_attempts=3, backoff=FAST)
    def flaky() -> None:
        raise ValueError("upstream said no")

    job_id = flaky.defer().id
    with running_worker(app, chronoq.WorkerOptions(poll_interval=0.2)) as (_, signals):
        signals.wait_for(lambda: any(o == Outcome.DEAD for _, o, _ in signals.finishes))
    job = app.get_job(job_id)
    assert job is not None
    assert job.status == JobStatus.DEAD
    assert job.attempts == 3
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    assert [e["outcome"] for e in job.errors] == ["retry", "retry", "dead"]
    for entry in job.errors:
        assert entry["error"] == "ValueError"
        assert entry["message"] == "upstream said no"
        assert "raise ValueError" in entry["traceback"]
        assert entry["worker"]
        assert entry["started_at"] <= entry["finished_at"]
    assert job.finished_at is not None


def test_retry_and_discard_raised_by_handlers(app: chronoq.App) -> None:
    @app.task(max_attempts=5)
    def later(ctx: chronoq.JobContext) -> None:
        if ctx.attempt == 1:
            raise chronoq.Retry(delay=0, reason="not yet")

    @app.task
    def drop() -> None:
        raise chronoq.Discard("customer deleted")

    later_id, drop_id = later.defer().id, drop.defer().id
    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.finishes) == 3)
    later_job, drop_job = app.get_job(later_id), app.get_job(drop_id)
    assert later_job is not None and drop_job is not None
    assert (later_job.status, later_job.attempts) == (JobStatus.DONE, 2)
    assert later_job.errors[0]["message"] == "not yet"
    assert drop_job.status == JobStatus.CANCELLED
    assert drop_job.errors[0]["message"] == "customer deleted"


def test_unknown_task_and_bad_payload_are_dead_lettered_and_the_worker_goes_on(
    app: chronoq.App,
) -> None:
    @app.task
    def greet(name: str) -> None:
        pass

    unknown, misfit = app.store.job_insert_many(
        [
            JobInsertParams("default", "no_such_task", "{}"),
            JobInsertParams("default", "greet", '{"nom": "x"}'),
        ]
    )
    fine = greet.defer(name="ok")
    stats = burst(app)
    assert stats.dead == 2 and stats.done == 1
    unknown_job, misfit_job = app.get_job(unknown.id), app.get_job(misfit.id)
    assert unknown_job is not None and misfit_job is not None
    assert unknown_job.errors[-1]["error"] == "UnknownTask"
    assert "no_such_task" in unknown_job.errors[-1]["message"]
    assert misfit_job.errors[-1]["error"] == "InvalidPayload"
    assert "nom" in misfit_job.errors[-1]["message"]
    assert app.get_job(fine.id).status == JobStatus.DONE  # type: ignore[union-attr]


def test_delayed_job_wakes_the_worker_by_timer_not_by_poll(app: chronoq.App) -> None:
    @app.task
    def tick() -> None:
        pass

    job_id = tick.configure(delay=timedelta(milliseconds=300)).defer().id
    with running_worker(app, chronoq.WorkerOptions(poll_interval=60)) as (_, signals):
        signals.wait_for(lambda: len(signals.finishes) == 1, timeout=30)
    job = app.get_job(job_id)
    assert job is not None and job.started_at is not None
    # Well inside the 60 s poll fallback: the local timer at run_at woke the worker.
    assert job.started_at - job.run_at < timedelta(seconds=5)


def test_new_job_wakes_an_idle_worker_through_change_notification(app: chronoq.App) -> None:
    @app.task
    def tick() -> None:
        pass

    with running_worker(app, chronoq.WorkerOptions(poll_interval=60)) as (_, signals):
        signals.wait_for(lambda: signals.idles >= 1)
        job_id = tick.defer().id
        signals.wait_for(lambda: len(signals.finishes) == 1, timeout=30)
    job = app.get_job(job_id)
    assert job is not None and job.started_at is not None
    assert job.started_at - job.run_at < timedelta(seconds=5)


def test_a_job_enqueued_before_the_listener_is_up_is_not_left_for_the_poll(
    app: chronoq.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's first claim runs while its change listener still connects: a job
    committed in between notified no one, so the listener, once up, wakes the claim loop."""

    @app.task
    def tick() -> None:
        pass

    listening = threading.Event()
    open_listener = app.store.open_listener

    def open_late() -> Any:
        listening.wait(30)
        return open_listener()

    monkeypatch.setattr(app.store, "open_listener", open_late)
    with running_worker(app, chronoq.WorkerOptions(poll_interval=60)) as (_, signals):
        signals.wait_for(lambda: signals.idles >= 1)
        tick.defer()  # its notification reaches no listener
        listening.set()
        signals.wait_for(lambda: len(signals.finishes) == 1, timeout=30)


def test_heartbeats_keep_a_long_job_owned_past_its_lease(app: chronoq.App) -> None:
    release = threading.Event()

    @app.task(lease=0.6)
    def long_job() -> None:
        release.wait(30)

    job_id = long_job.defer().id
    with running_worker(app) as (_, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        first = app.get_job(job_id)
        assert first is not None and first.locked_until is not None
        wait_until(lambda: app.store.db_now() > first.locked_until + timedelta(seconds=0.6))
        assert app.store.job_rescue_expired(JobRescueParams()).requeued == []
        during = app.get_job(job_id)
        assert during is not None
        assert during.status == JobStatus.RUNNING
        assert during.lease_token == first.lease_token
        release.set()
        signals.wait_for(lambda: len(signals.finishes) == 1)
    done = app.get_job(job_id)
    assert done is not None and (done.status, done.attempts) == (JobStatus.DONE, 1)


def test_graceful_stop_finishes_the_job_in_flight(app: chronoq.App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task
    def slow() -> None:
        started.set()
        release.wait(30)

    job_id = slow.defer().id
    with running_worker(app) as (worker, signals):
        assert started.wait(20)
        worker.request_stop()
        release.set()
        signals.wait_for(lambda: len(signals.finishes) == 1)
    job = app.get_job(job_id)
    assert job is not None and job.status == JobStatus.DONE


def test_jobs_claimed_after_stop_are_released_without_using_an_attempt(app: chronoq.App) -> None:
    @app.task
    def noop() -> None:
        pass

    class StopOnClaim(chronoq.testing.WorkerSignals):
        def claimed(self, jobs: Any) -> None:
            worker.request_stop()

    ids = [r.id for r in app.enqueue_many([chronoq.JobSpec("noop") for _ in range(3)])]
    worker = chronoq.Worker(app, chronoq.WorkerOptions(), [StopOnClaim()])
    stats = worker.run(install_signal_handlers=False)
    # A db claim takes all three at once; tiered dispatch hands them over as their leader moves
    # them, so its first claim (the one that stops the worker) may hold fewer.
    held = 3 if app.config.dispatch == "db" else stats.claimed
    assert stats.released == held >= 1 and stats.done == 0
    for job_id in ids:
        job = app.get_job(job_id)
        assert job is not None
        assert (job.status, job.attempts, job.worker_id) == (JobStatus.PENDING, 0, None)


def test_async_job_cut_off_by_shutdown_is_retried(app: chronoq.App) -> None:
    started = asyncio.Event()

    @app.task(backoff=FAST)
    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    job_id = forever.defer().id
    options = chronoq.WorkerOptions(shutdown_grace=0.2)
    with running_worker(app, options) as (_, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
    job = app.get_job(job_id)
    assert job is not None
    assert job.status == JobStatus.PENDING
    assert job.errors[-1]["error"].endswith("_Interrupted")


def test_stale_worker_cannot_complete_a_job_claimed_again(app: chronoq.App) -> None:
    """In-process version of the SIGSTOP story: the lease lapses while the handler runs."""
    release = threading.Event()

    @app.task(lease=0.3)
    def stalls(ctx: chronoq.JobContext) -> None:
        if ctx.attempt == 1:
            release.wait(30)

    job_id = stalls.defer().id
    options = chronoq.WorkerOptions(poll_interval=0.1, rescue_interval=0.1)
    with running_worker(app, options) as (worker, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        # Freeze this worker's heartbeats by rescuing the job on a pinned future clock.
        future = app.store.db_now() + timedelta(seconds=1)
        rescued = app.store.job_rescue_expired(JobRescueParams(now=future))
        assert rescued.requeued == [job_id]
        signals.wait_for(lambda: len(signals.claims) == 2)
        signals.wait_for(lambda: any(ok for _, _, ok in signals.finishes))
        release.set()
        signals.wait_for(lambda: len(signals.finishes) == 2)
    accepted = [(job.lease_token, ok) for job, _, ok in signals.finishes]
    assert sorted(accepted) == [(1, False), (2, True)]
    assert worker.stats.lost == 1
    job = app.get_job(job_id)
    assert job is not None and (job.status, job.lease_token) == (JobStatus.DONE, 2)


def test_a_stale_attempt_ending_leaves_the_newer_attempt_held(app: chronoq.App) -> None:
    """The worker claims its own lost job again while the stale attempt still runs; when the
    stale one ends, the newer attempt is still this worker's to heartbeat and report."""
    gates = {1: threading.Event(), 2: threading.Event()}

    @app.task(lease=0.3)
    def stalls(ctx: chronoq.JobContext) -> None:
        gates[ctx.attempt].wait(30)

    job_id = stalls.defer().id
    options = chronoq.WorkerOptions(poll_interval=0.1, rescue_interval=0.1)
    with running_worker(app, options) as (worker, signals):
        signals.wait_for(lambda: len(signals.claims) == 1)
        future = app.store.db_now() + timedelta(seconds=1)
        assert app.store.job_rescue_expired(JobRescueParams(now=future)).requeued == [job_id]
        signals.wait_for(lambda: len(signals.claims) == 2)
        gates[1].set()
        signals.wait_for(lambda: len(signals.finishes) == 1)
        [(stale, _, accepted)] = signals.finishes
        assert (stale.lease_token, accepted) == (1, False)
        held = worker.holdings.owned.get(job_id)
        assert held is not None and held.job.lease_token == 2
        gates[2].set()
        signals.wait_for(lambda: len(signals.finishes) == 2)
    assert signals.finishes[1][0].lease_token == 2 and signals.finishes[1][2]
    job = app.get_job(job_id)
    assert job is not None and (job.status, job.attempts) == (JobStatus.DONE, 2)


def test_transactional_completion_commits_with_the_handlers_writes(dsn: str) -> None:
    effects_table_sql = "CREATE TABLE IF NOT EXISTS effects (job_id bigint, token bigint)"
    with chronoq.App(dsn) as app:
        if dsn.startswith("sqlite"):
            path = app.store.path  # type: ignore[attr-defined]

            def connect() -> Any:
                return sqlite3.connect(path, isolation_level=None)
        else:

            def connect() -> Any:
                return psycopg.connect(dsn)

        with connect() as setup:
            setup.execute(effects_table_sql)
            if dsn.startswith("postgres"):
                setup.commit()

        @app.task
        def charge(ctx: chronoq.JobContext, fail_after_write: bool) -> None:
            conn = connect()
            try:
                if dsn.startswith("sqlite"):
                    conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "INSERT INTO effects VALUES (?, ?)"
                    if dsn.startswith("sqlite")
                    else "INSERT INTO effects VALUES (%s, %s)",
                    (ctx.id, ctx.lease_token),
                )
                ctx.complete_in(conn)
                if fail_after_write:
                    conn.rollback() if dsn.startswith("postgres") else conn.execute("ROLLBACK")
                    raise RuntimeError("rolled back after the write")
                conn.commit() if dsn.startswith("postgres") else conn.execute("COMMIT")
            finally:
                conn.close()

        good = charge.defer(fail_after_write=False).id
        bad = charge.configure(max_attempts=1).defer(fail_after_write=True).id
        burst(app)
        with connect() as check:
            rows = check.execute("SELECT job_id, token FROM effects").fetchall()
        assert [tuple(r) for r in rows] == [(good, 1)]
        good_job, bad_job = app.get_job(good), app.get_job(bad)
        assert good_job is not None and good_job.status == JobStatus.DONE
        assert bad_job is not None and bad_job.status == JobStatus.DEAD


def test_enqueue_joins_the_callers_transaction(pg_dsn: str) -> None:
    dsn = pg_dsn
    with chronoq.App(dsn) as app:

        @app.task
        def welcome(user: int) -> None:
            pass

        with psycopg.connect(dsn) as conn:
            welcome.configure(conn=conn).defer(user=1)
            conn.rollback()
            kept = welcome.configure(conn=conn).defer(user=2).id
            conn.commit()
        assert [job.id for job in app.store.job_list(chronoq.storage.base.JobListParams())] == [
            kept
        ]


def test_async_enqueue_on_an_async_connection(pg_dsn: str) -> None:
    dsn = pg_dsn
    with chronoq.App(dsn) as app:

        @app.task
        def welcome(user: int) -> None:
            pass

        async def scenario() -> tuple[int, int]:
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                first = await welcome.configure(conn=conn, key="w-1").defer_async(user=1)
                again = await app.enqueue_async("welcome", {"user": 1}, conn=conn, key="w-1")
                await conn.commit()
            plain = await welcome.configure(delay="1h").defer_async(user=3)
            assert again.id == first.id and not again.created
            return first.id, plain.id

        first_id, plain_id = asyncio.run(scenario())
        assert app.get_job(first_id) is not None
        plain = app.get_job(plain_id)
        assert plain is not None and plain.run_at > datetime.now(UTC) + timedelta(minutes=59)


def test_a_failing_reporter_stops_the_worker_loudly(app: chronoq.App) -> None:
    """A background loop of the worker that dies must not leave a worker that claims on."""

    @app.task
    def noop() -> None:
        pass

    class Broken(chronoq.testing.WorkerSignals):
        def finished(self, job: Any, outcome: Any, accepted: bool) -> None:
            raise RuntimeError("hook exploded")

    noop.defer()
    worker = chronoq.Worker(app, chronoq.WorkerOptions(poll_interval=60), [Broken()])
    with pytest.raises(RuntimeError, match="hook exploded"):
        worker.run(install_signal_handlers=False)


def test_a_payload_that_is_not_an_object_is_dead_lettered(app: chronoq.App) -> None:
    @app.task
    def greet(name: str = "x") -> None:
        pass

    [result] = app.store.job_insert_many([JobInsertParams("default", "greet", "[1, 2]")])
    assert burst(app).dead == 1
    job = app.get_job(result.id)
    assert job is not None
    assert "must be a JSON object, got list" in job.errors[-1]["message"]


def test_a_job_enqueued_by_name_only_follows_the_tasks_settings(dsn: str) -> None:
    with chronoq.App(dsn) as producer:  # knows no task, like the CLI without --app
        job_id = producer.enqueue("fragile").id
    with chronoq.App(dsn) as app:

        @app.task(max_attempts=2, backoff=FAST, lease=7)
        def fragile() -> None:
            raise ConnectionError("down")

        with running_worker(app) as (_, signals):
            signals.wait_for(lambda: any(o == Outcome.DEAD for _, o, _ in signals.finishes))
        job = app.get_job(job_id)
    assert job is not None
    assert (job.status, job.attempts, job.max_attempts) == (JobStatus.DEAD, 2, 2)
    assert job.lease_seconds == 7
