"""How many jobs a worker takes: free slots, plus one batch ahead only for quick handlers."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import chronoq
from chronoq.core.jobs import JobStatus
from tests.helpers import RecordingSignals


@pytest.fixture
def app(dsn: str) -> Any:
    with chronoq.App(dsn) as application:
        yield application


def status(app: chronoq.App, job_id: int) -> tuple[JobStatus, int]:
    job = app.get_job(job_id)
    assert job is not None
    return job.status, job.attempts


class Blocker:
    """A sync handler that holds its slot until the test lets it go."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.started.set()
        assert self.release.wait(20), "the test never released the handler"


def start(worker: chronoq.Worker) -> threading.Thread:
    thread = threading.Thread(
        target=worker.run, kwargs={"install_signal_handlers": False}, daemon=True
    )
    thread.start()
    return thread


def test_a_worker_without_timing_claims_only_its_free_slots(app: chronoq.App) -> None:
    """Until handlers have shown to be quick, nothing is claimed that cannot start: a job
    waiting behind a slow handler stays pending for any other worker to take."""
    blocker = Blocker()
    app.task(name="block", priority=10)(blocker)
    app.task(name="quick")(lambda: None)
    first = app.enqueue("block").id
    second = app.enqueue("quick").id
    signals = RecordingSignals()
    worker = chronoq.Worker(app, chronoq.WorkerOptions(concurrency=1, batch_size=5), [signals])
    thread = start(worker)
    try:
        assert blocker.started.wait(20)
        assert [job.id for job in signals.claims] == [first]
        assert status(app, second) == (JobStatus.PENDING, 0)
    finally:
        blocker.release.set()
        signals.wait_for(lambda: len(signals.finishes) == 2)
        worker.request_stop()
        thread.join(30)
    assert worker.stats.done == 2


def test_quick_handlers_get_a_batch_ahead_which_a_stop_gives_back(app: chronoq.App) -> None:
    blocker = Blocker()
    app.task(name="block", priority=10)(blocker)
    app.task(name="quick")(lambda: None)
    blocked = app.enqueue("block").id
    ahead, behind = (app.enqueue("quick").id for _ in range(2))
    signals = RecordingSignals()
    worker = chronoq.Worker(app, chronoq.WorkerOptions(concurrency=1, batch_size=1), [signals])
    # As measured after quick jobs: handlers return long before a claim comes back.
    worker.pacer.handler_took(0.0001)
    worker.pacer.claim_took(0.01)
    thread = start(worker)
    try:
        assert blocker.started.wait(20)
        signals.wait_for(lambda: len(signals.claims) == 2)
        assert [job.id for job in signals.claims] == [blocked, ahead]
        assert status(app, ahead) == (JobStatus.RUNNING, 1)  # held for the busy slot
        assert status(app, behind) == (JobStatus.PENDING, 0)  # at most one batch ahead
        worker.request_stop()
    finally:
        blocker.release.set()
        thread.join(30)
    assert not thread.is_alive()
    assert worker.stats.done == 1 and worker.stats.released == 1
    assert status(app, blocked) == (JobStatus.DONE, 1)
    # Given back as if never claimed: pending, no attempt used.
    assert status(app, ahead) == (JobStatus.PENDING, 0)
    assert status(app, behind) == (JobStatus.PENDING, 0)


def test_jobs_claimed_ahead_run_as_slots_free(app: chronoq.App) -> None:
    ran: list[int] = []

    @app.task
    def record(n: int) -> None:
        ran.append(n)

    app.enqueue_many([chronoq.JobSpec("record", {"n": n}) for n in range(50)])
    worker = chronoq.Worker(app, chronoq.WorkerOptions(concurrency=2, batch_size=10, burst=True))
    worker.pacer.handler_took(0.0001)
    worker.pacer.claim_took(0.01)
    stats = worker.run(install_signal_handlers=False)
    assert stats.done == 50 and stats.released == 0
    assert sorted(ran) == list(range(50))
    assert {s.status for s in app.store.stats()} == {JobStatus.DONE}
