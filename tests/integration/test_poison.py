"""Poison jobs: handlers that kill their process, never return, or block the event loop.

Each one must end `dead` at exactly its max_attempts, with the reason in its errors, while the
jobs of another queue all get done and the supervisor keeps its workers running.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg
import pytest

from chronoq import App, Backoff, Job, JobStatus, Outcome, Worker, WorkerOptions
from chronoq.storage.base import JobClaimParams, JobFinishParams, ProcessListParams
from chronoq.storage.dsn import session_name
from chronoq.worker.completer import STUCK_RETRY_FLOOR
from chronoq.worker.ledger import CRASH_SPREAD, JobLedger, LedgerReader, Orphans, settle_orphans
from tests.helpers import held_job, running_worker, wait_until
from tests.integration.cli_support import Spawner, enqueue, status

POISON_APP = '''
"""Poison handlers, and ordinary work on a queue of its own."""

import asyncio
import os
import signal
import threading

import chronoq

app = chronoq.App()
QUICK = chronoq.Backoff(base=0.05, cap=0.2)


@app.task(queue="poison", max_attempts=3, backoff=QUICK)
def exit_hard() -> None:
    os._exit(3)


@app.task(queue="alone", max_attempts=3, backoff=QUICK, lease=1.0)
def exit_alone() -> None:
    os._exit(3)


@app.task(queue="poison", max_attempts=3, backoff=QUICK)
async def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(queue="poison", max_attempts=3, backoff=QUICK, timeout=0.3)
def hang_in_thread() -> None:
    threading.Event().wait()


@app.task(queue="poison", max_attempts=3, backoff=QUICK, timeout=0.3)
async def hang_async() -> None:
    await asyncio.Event().wait()


@app.task(queue="poison", max_attempts=3, backoff=QUICK, lease=1.5)
async def block_loop() -> None:
    threading.Event().wait()  # a blocking call in async code: the whole event loop stops


@app.task(queue="work", max_attempts=10, backoff=QUICK)
def work(n: int) -> int:
    return n * 2
'''

# task → what its errors say about each attempt
POISONS = {
    "exit_hard": ("WorkerCrashed", "exited with code 3"),
    "kill_self": ("WorkerCrashed", "was killed by SIGKILL"),
    "hang_in_thread": ("chronoq.errors.JobTimeout", "0.3s timeout"),
    "hang_async": ("chronoq.errors.JobTimeout", "0.3s timeout"),
    "block_loop": ("", "exited with code 75"),
}
WORK_JOBS = 300


@pytest.fixture
def poison_spec(write_app: Callable[[str], str]) -> str:
    return write_app(POISON_APP)


@pytest.mark.parametrize("task", sorted(POISONS))
def test_a_poison_job_ends_dead_at_max_attempts_and_other_work_goes_on(
    task: str, url: str, poison_spec: str, spawner: Spawner, reader: App
) -> None:
    poison = enqueue(url, task, "--app", poison_spec)
    work = [
        reader.enqueue("work", {"n": n}, queue="work").id  # type: ignore[union-attr]
        for n in range(WORK_JOBS)
    ]
    supervisor = spawner.start(
        "worker", "--app", poison_spec, "--dsn", url, "--processes", "2", "--concurrency", "4"
    )

    wait_until(
        lambda: status(reader, poison) == JobStatus.DEAD, timeout=60, what=f"{task} to go dead"
    )
    wait_until(
        lambda: all(status(reader, job_id) == JobStatus.DONE for job_id in work),
        timeout=60,
        what="every job of the other queue done",
    )

    job = reader.get_job(poison)
    assert job is not None
    assert job.attempts == 3, job.errors
    assert len(job.errors) == 3, job.errors
    kind, message = POISONS[task]
    for error in job.errors:
        if kind:
            assert error["error"] == kind, error
            assert message in error["message"], error
    if task == "block_loop":
        # The watchdog exits the process once the lease has run out; the jobs come back
        # through the supervisor or the lease rescue, whichever gets there first.
        assert {e["error"] for e in job.errors} <= {"WorkerCrashed", "LeaseExpired"}, job.errors
    assert [e["outcome"] for e in job.errors] == ["retry", "retry", "dead"]
    assert supervisor.poll() is None, "the supervisor gave up: " + spawner.log(supervisor)

    supervisor.send_signal(signal.SIGTERM)
    assert spawner.wait(supervisor) == 0, spawner.log(supervisor)
    assert "giving up" not in spawner.log(supervisor)


def test_a_poison_job_killing_a_lone_worker_ends_dead_through_lease_rescues(
    url: str, poison_spec: str, spawner: Spawner, reader: App
) -> None:
    """Without a supervisor, each crash is recovered by the lease (the test restarts the worker,
    as systemd would), and the attempt counted at claim still ends the job at max_attempts."""
    poison = enqueue(url, "exit_alone", "--app", poison_spec)
    exits: list[int] = []
    while True:
        worker = spawner.start("worker", "--app", poison_spec, "--dsn", url, "--queues", "alone")
        # It rescues the job once the last crash's lease is over, claims it, and dies; or, after
        # the last attempt, the rescue ends the job dead and the worker stays up, idle.
        wait_until(
            lambda w=worker: w.poll() is not None or status(reader, poison) == JobStatus.DEAD,
            what="the worker to crash or the job to go dead",
        )
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        exits.append(spawner.wait(worker))
        if status(reader, poison) == JobStatus.DEAD or len(exits) > 4:
            break
    job = reader.get_job(poison)
    assert job is not None and (job.status, job.attempts) == (JobStatus.DEAD, 3), exits
    assert exits == [3, 3, 3, 0], exits
    assert [e["error"] for e in job.errors] == ["LeaseExpired"] * 3
    assert [e["outcome"] for e in job.errors] == ["retry", "retry", "dead"]


def test_jobs_claimed_ahead_by_a_crashed_process_keep_their_attempts(
    url: str, poison_spec: str, spawner: Spawner, reader: App
) -> None:
    """Crashes in the middle of a stream of work: every attempt a job lost is explained by a
    crash it ran in (a job only claimed ahead is given back unused, and none waits for its
    lease to run out)."""
    work = [
        reader.enqueue("work", {"n": n}, queue="work").id  # type: ignore[union-attr]
        for n in range(3000)
    ]
    supervisor = spawner.start(
        "worker", "--app", poison_spec, "--dsn", url, "--processes", "2", "--batch", "50"
    )
    # Once the workers claim ahead (their handlers are quicker than a claim), poison jobs jump
    # the line and land in batches with work that waits in the buffer.
    wait_until(lambda: status(reader, work[500]) == JobStatus.DONE, what="the workers warm")
    poisons = [enqueue(url, "exit_hard", "--app", poison_spec, "--priority", "9") for _ in range(3)]
    wait_until(
        lambda: all(status(reader, p) == JobStatus.DEAD for p in poisons),
        timeout=60,
        what="the poison jobs to go dead",
    )
    wait_until(
        lambda: all(status(reader, job_id) == JobStatus.DONE for job_id in work),
        timeout=60,
        what="every job of the other queue done",
    )
    supervisor.send_signal(signal.SIGTERM)
    assert spawner.wait(supervisor) == 0, spawner.log(supervisor)
    # A job that ran beside a poison one when it struck loses that attempt; one that was only
    # claimed ahead does not. So every extra attempt is explained by a crash record.
    for job_id in work:
        job = reader.get_job(job_id)
        assert job is not None
        crashes = [e for e in job.errors if e["error"] == "WorkerCrashed"]
        assert job.attempts == 1 + len(crashes), json.dumps(job.errors)


# A worker process's claim, sent on a session named after its worker id as a supervised child's
# are (chronoq.cli.worker); it never returns while the test holds chronoq_jobs locked.
CLAIMING_CHILD = """
import sys

from chronoq.storage.base import JobClaimParams
from chronoq.storage.dsn import with_session_name
from chronoq.storage.postgres.store import PostgresStore

dsn, worker_id = sys.argv[1:]
store = PostgresStore(with_session_name(dsn, worker_id), pool_size=1)
store.job_claim_with_wakeup(JobClaimParams(["default"], 10, worker_id))
"""


def _sessions(dsn: str, worker_id: str, *, waiting_for_a_lock: bool = False) -> int:
    """How many sessions named after `worker_id` the server has (only those waiting for a lock)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND (NOT %s OR wait_event_type = 'Lock')",
            (session_name(worker_id), waiting_for_a_lock),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_claim_still_executing_when_its_process_died_takes_nothing_from_the_settlement(
    pg_dsn: str,
) -> None:
    """PostgreSQL runs a statement whose client is gone to its end and commits it. Here a dead
    process's claim waits for a lock on the server while the supervisor settles its jobs: the
    settlement ends the claim first, so it never takes the jobs, which would otherwise wait for
    their leases (60 s) to come back, one attempt spent."""
    app = App(pg_dsn)

    @app.task()
    def job(n: int) -> None: ...

    ids = [job.defer(n=n).id for n in range(3)]  # type: ignore[union-attr]
    worker_id = "dead-host:4242:c0ffee"
    with psycopg.connect(pg_dsn) as blocker:  # a transaction: the lock holds until it ends
        blocker.execute("LOCK TABLE chronoq_jobs IN SHARE MODE")  # no UPDATE gets through
        child = subprocess.Popen([sys.executable, "-c", CLAIMING_CHILD, pg_dsn, worker_id])
        try:
            wait_until(
                lambda: _sessions(pg_dsn, worker_id, waiting_for_a_lock=True),
                what="the child's claim to wait for the lock",
            )
        finally:
            child.kill()
            child.wait(30)
        orphans = Orphans(child.pid, -signal.SIGKILL, worker_id, frozenset())
        assert settle_orphans(app.store, orphans) == (set(), set())
    # The lock is gone: a claim still on the server would now take the jobs, and end.
    wait_until(lambda: _sessions(pg_dsn, worker_id) == 0, what="the child's sessions to end")
    for job_id in ids:
        stored = app.get_job(job_id)
        assert stored is not None
        assert (stored.status, stored.attempts, stored.worker_id) == (JobStatus.PENDING, 0, None)
    app.close()


def test_a_supervised_worker_names_its_database_sessions_after_its_worker_id(
    pg_dsn: str, app_spec: str, spawner: Spawner
) -> None:
    """What lets the supervisor end a dead child's sessions: it knows them by that name."""
    supervisor = spawner.start("worker", "--app", app_spec, "--dsn", pg_dsn, "--processes", "2")

    def workers() -> list[str]:
        with App(pg_dsn) as reader:
            fleet = reader.store.process_list(ProcessListParams()).processes
        return [r.info.id for r in fleet if r.info.kind == "worker"]

    ids = wait_until(lambda: len(workers()) == 2 and workers(), what="both workers to register")
    for worker_id in ids:
        assert _sessions(pg_dsn, worker_id) >= 1, worker_id
    supervisor.send_signal(signal.SIGTERM)
    assert spawner.wait(supervisor) == 0, spawner.log(supervisor)


# -- timeouts, in process ---------------------------------------------------------------------


def test_an_async_handler_past_its_timeout_is_cancelled_and_retried(dsn: str) -> None:
    app = App(dsn)
    cancelled = threading.Event()

    @app.task(max_attempts=2, backoff=Backoff(base=0.01, cap=0.01), timeout=0.05)
    async def hang() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job_id = hang.defer().id  # type: ignore[union-attr]
    with running_worker(app) as (worker, signals):
        signals.wait_for(lambda: any(o == Outcome.DEAD for _, o, _ in signals.finishes))
    job = app.get_job(job_id)
    assert job is not None and job.status == JobStatus.DEAD
    assert [e["error"] for e in job.errors] == ["chronoq.errors.JobTimeout"] * 2
    assert "0.05s timeout" in job.errors[0]["message"]
    assert cancelled.is_set()
    assert worker.stats.stuck == 0
    app.close()


def test_a_sync_handler_past_its_timeout_retires_the_worker_after_the_others_finish(
    dsn: str,
) -> None:
    app = App(dsn)
    release = threading.Event()
    others_started = threading.Event()

    @app.task(max_attempts=3, backoff=Backoff(base=0.001, cap=0.001), timeout=0.1)
    def stuck() -> None:
        release.wait(30)

    @app.task
    def steady(gate: str) -> str:
        others_started.set()
        release.wait(0.3)  # outlives the timeout above, so it is in flight when that fires
        return gate

    stuck_id = stuck.defer().id  # type: ignore[union-attr]
    steady_id = steady.defer(gate="x").id  # type: ignore[union-attr]
    worker = Worker(app, WorkerOptions(concurrency=4))
    try:
        stats = worker.run(install_signal_handlers=False)  # returns by itself: it retired
    finally:
        release.set()
    assert stats.stuck == 1
    steady_job, stuck_job = app.get_job(steady_id), app.get_job(stuck_id)
    assert steady_job is not None and steady_job.status == JobStatus.DONE
    assert stuck_job is not None and stuck_job.status == JobStatus.PENDING
    assert stuck_job.attempts == 1
    assert [e["error"] for e in stuck_job.errors] == ["chronoq.errors.JobTimeout"]
    # Its retry waits at least STUCK_RETRY_FLOOR, though its backoff is a millisecond.
    finished = datetime.fromisoformat(stuck_job.errors[0]["finished_at"])
    assert stuck_job.run_at - finished >= timedelta(seconds=STUCK_RETRY_FLOOR * 0.99)
    app.close()


# -- settling a dead process's jobs -----------------------------------------------------------


def test_settling_orphans_fails_started_jobs_releases_the_others_and_is_fenced(
    dsn: str,
) -> None:
    app = App(dsn)

    @app.task(max_attempts=2, backoff=Backoff(base=10, cap=10))
    def job(n: int) -> None: ...

    queue = [app.config.default_queue]
    ids = [job.defer(n=n).id for n in range(4)]  # type: ignore[union-attr]
    other = app.store.job_claim_with_wakeup(JobClaimParams(queue, 1, "other")).jobs[
        0
    ]  # ids[0], not ours
    # ids[1] is on its last attempt: claimed, retried, claimed again.
    first = app.store.job_claim_with_wakeup(JobClaimParams(queue, 1, "dead-worker")).jobs[0]
    app.store.job_finish_many([JobFinishParams(first.id, first.lease_token, Outcome.RETRY)])
    claimed = app.store.job_claim_with_wakeup(JobClaimParams(queue, 3, "dead-worker")).jobs
    assert {j.id for j in claimed} == set(ids[1:])
    by_id = {j.id: j for j in claimed}
    # ids[3] was claimed ahead, never started.
    running = frozenset((j.id, j.lease_token) for j in claimed if j.id in ids[1:3])

    failed, released = settle_orphans(
        app.store, Orphans(4242, -signal.SIGKILL, "dead-worker", running)
    )

    assert (failed, released) == (set(ids[1:3]), {ids[3]})

    def get(job_id: int) -> Job:
        found = app.get_job(job_id)
        assert found is not None
        return found

    untouched, dead, retried, given_back = (get(i) for i in ids)
    assert (untouched.status, untouched.lease_token) == (JobStatus.RUNNING, other.lease_token)
    assert (dead.status, dead.attempts) == (JobStatus.DEAD, 2)
    assert dead.errors[-1]["error"] == "WorkerCrashed"
    assert dead.errors[-1]["message"] == (
        "the worker process (pid 4242) was killed by SIGKILL while this job ran"
    )
    assert dead.errors[-1]["worker"] == "dead-worker"
    assert (retried.status, retried.attempts) == (JobStatus.PENDING, 1)
    assert retried.errors[-1]["outcome"] == "retry"
    # It runs again at once, in its place in line: ahead of jobs that fell due after it.
    assert retried.run_at == by_id[ids[2]].run_at
    assert (given_back.status, given_back.attempts, given_back.errors) == (
        JobStatus.PENDING,
        0,
        [],
    )
    # A second settlement (a late or repeated one) finds nothing left to do.
    assert settle_orphans(app.store, Orphans(4242, -signal.SIGKILL, "dead-worker", running)) == (
        set(),
        set(),
    )
    app.close()


def test_a_job_that_crashed_a_process_before_loses_its_place_by_a_random_spread(
    dsn: str,
) -> None:
    app = App(dsn)

    @app.task(max_attempts=5)
    def job(n: int) -> None: ...

    queue = [app.config.default_queue]
    crasher, neighbour = (job.defer(n=n).id for n in range(2))  # type: ignore[union-attr]

    def crash_in(worker_id: str) -> Job:
        claimed = app.store.job_claim_with_wakeup(JobClaimParams(queue, 1, worker_id)).jobs[0]
        running = frozenset({(claimed.id, claimed.lease_token)})
        assert settle_orphans(app.store, Orphans(1, -signal.SIGKILL, worker_id, running))[0] == {
            claimed.id
        }
        return claimed

    first = crash_in("first")
    # Its first crash: again at once, in its place in line, ahead of the job behind it.
    second = crash_in("second")
    assert second.id == first.id == crasher
    again = app.get_job(crasher)
    assert again is not None
    assert (again.status, again.attempts) == (JobStatus.PENDING, 2)
    assert [e["error"] for e in again.errors] == ["WorkerCrashed", "WorkerCrashed"]
    # Its second: after a delay of its own, behind the job that never crashed.
    assert again.run_at > first.run_at
    assert second.started_at is not None
    assert again.run_at - second.started_at < timedelta(seconds=CRASH_SPREAD + 5)
    nxt = app.store.job_claim_with_wakeup(JobClaimParams(queue, 1, "third")).jobs
    assert [j.id for j in nxt] == [neighbour]
    app.close()


def test_the_ledger_tells_the_reader_what_a_process_runs() -> None:
    read_fd, write_fd = os.pipe()
    ledger = JobLedger(write_fd)
    one, two, three = (held_job(job_id, token=1) for job_id in (1, 2, 3))
    ledger.hello("w1")
    ledger.started([one, two])
    ledger.ended([two])
    ledger.started([three])
    ledger.ended([one])  # written at once, not with a next line that may never come
    ledger.close()
    reader = LedgerReader()
    while data := os.read(read_fd, 7):  # small reads: lines arrive in pieces
        reader.feed(data)
    os.close(read_fd)
    assert (reader.worker_id, reader.running) == ("w1", {3: 1})

    # Job 4 ran under token 1, was claimed again and started under token 2: the late "ended"
    # of its first run, sent with a later line, does not end the second.
    again = LedgerReader()
    again.feed(b'{"started":[[4,1]]}\n{"started":[[4,2]],"ended":[[4,1]]}\n')
    again.feed(b'{"started":[[5,1]],"ended":[[4,1]]}\n')
    assert again.running == {4: 2, 5: 1}

    torn = LedgerReader()
    torn.feed(b'{"started":[[9,1]]}\n{"started":[[10,1')
    assert torn.running == {9: 1}
