"""A waiting worker's claim is sent by the thread its source wakes it from (WakeClaim), on
every store and dispatch, and a claim still out when the worker stops is given back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

import chronoq
from chronoq.core.jobs import Job, JobStatus
from chronoq.worker.source import JobSource, Taken
from tests.helpers import running_worker, wait_until
from tests.services.tier import app_by_dispatch

WAIT = 30.0
WAKING_THREADS = {"chronoq-listen", "chronoq-stream"}  # DbJobSource's, StreamJobSource's


@pytest.fixture(params=["sqlite", "postgres", "tiered"])
def app(request: pytest.FixtureRequest) -> Any:
    yield from app_by_dispatch(request)


class ThreadRecording:
    """The worker's source, noting the thread of each take that returned jobs; with `hold`,
    a take on a waking thread waits for `release` after its claim (jobs in hand).

    The source's wake-ups wait on the source's own thread until the test lets them through
    (`let_wakes_through`, once its job is stored). A wake-up that reached the worker between
    two of its waits (the listener's first, sent once it has connected; SQLite's signal of the
    worker's own first beat) would have the loop claim by itself, on an I/O thread, the job the
    test then stores: the claim under test would not be the waking thread's. Held, the first
    wake-up the worker gets finds it waiting, and its claim finds the job."""

    def __init__(self, inner: JobSource, *, hold: bool = False) -> None:
        self.inner = inner
        self.hold = hold
        self.threads: list[str] = []
        self.claim_out = threading.Event()
        self.release = threading.Event()
        self.given_back: list[int] = []
        self.gave_back = threading.Event()
        self.wakes = 0  # wake-ups the source gave the worker
        self._wakes_through = threading.Event()

    def start(self, wake: Callable[[], None]) -> None:
        def counted() -> None:
            self._wakes_through.wait(WAIT)
            self.wakes += 1
            wake()

        self.inner.start(counted)

    def let_wakes_through(self) -> None:
        self._wakes_through.set()

    def take(self, limit: int) -> Taken:
        taken = self.inner.take(limit)
        name = threading.current_thread().name
        if taken.jobs:
            self.threads.append(name)
            if self.hold and name in WAKING_THREADS:
                self.claim_out.set()
                assert self.release.wait(WAIT), "the test never released the claim"
        return taken

    def give_back(self, jobs: Sequence[Job]) -> set[int]:
        released = self.inner.give_back(jobs)
        self.given_back.extend(released)
        self.gave_back.set()
        return released

    def close(self) -> None:
        self.inner.close()


@contextmanager
def waiting_worker(
    app: chronoq.App, *, hold: bool = False
) -> Iterator[tuple[chronoq.Worker, ThreadRecording]]:
    """A worker on a thread, its source recorded, once it waits for a wake-up with room (its
    poll far off, so only a wake-up brings it a job). Nothing wakes it before the test lets
    the source's wake-ups through (see ThreadRecording)."""
    recordings: list[ThreadRecording] = []

    def wrap(inner: JobSource) -> JobSource:
        recordings.append(ThreadRecording(inner, hold=hold))
        return recordings[0]

    options = chronoq.WorkerOptions(poll_interval=60)
    with running_worker(app, options, wrap_source=wrap) as (worker, _):
        try:
            wait_until(lambda: worker._wake_claim.waiting, what="the worker waiting with room")
            yield worker, recordings[0]
        finally:
            recordings[0].let_wakes_through()
            recordings[0].release.set()  # a claim held back must not hold up the stop


def test_the_thread_that_wakes_a_waiting_worker_sends_its_claim(app: chronoq.App) -> None:
    ran = threading.Event()

    @app.task()
    def note() -> None:
        ran.set()

    with waiting_worker(app) as (_, recording):
        job = note.defer()
        recording.let_wakes_through()
        assert ran.wait(WAIT), "the job never ran"
    assert recording.threads[0] in WAKING_THREADS
    stored = app.get_job(job.id)
    assert stored is not None
    assert stored.status is JobStatus.DONE


def test_a_claim_still_out_when_the_worker_stops_is_given_back(app: chronoq.App) -> None:
    ran = threading.Event()

    @app.task()
    def note() -> None:
        ran.set()

    with waiting_worker(app, hold=True) as (worker, recording):
        job = note.defer()
        recording.let_wakes_through()
        assert recording.claim_out.wait(WAIT), "no claim was sent from the waking thread"
        worker.request_stop()
        recording.release.set()
        assert recording.gave_back.wait(WAIT), "the stopping worker kept the claimed job"
    assert recording.given_back == [job.id]
    assert not ran.is_set()
    stored = app.get_job(job.id)
    assert stored is not None
    assert stored.status is JobStatus.PENDING
    assert stored.attempts == 0


def test_a_wake_up_after_the_waking_threads_claim_left_is_not_lost(app: chronoq.App) -> None:
    # The loop is held while the waking thread claims the first job and a second job's
    # wake-up arrives: both signals then reach the loop at once, and the second job must run
    # now, not when the worker's 60 s poll ends.
    ran: list[int] = []
    both = threading.Event()

    @app.task()
    def note(n: int) -> None:
        ran.append(n)
        if len(ran) == 2:
            both.set()

    with waiting_worker(app) as (worker, recording):
        held, release = threading.Event(), threading.Event()

        def hold_the_loop() -> None:
            held.set()
            release.wait(WAIT)

        worker._rt.loop.call_soon_threadsafe(hold_the_loop)
        try:
            assert held.wait(WAIT), "the worker's loop never ran the hold"
            note.defer(1)
            recording.let_wakes_through()
            wait_until(lambda: recording.threads, what="the waking thread's claim")
            wakes = recording.wakes
            note.defer(2)
            wait_until(lambda: recording.wakes > wakes, what="the second job's wake-up")
        finally:
            release.set()
        assert both.wait(WAIT), f"only {ran} ran: the second wake-up was lost"
    assert recording.threads[0] in WAKING_THREADS
