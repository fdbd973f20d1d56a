"""Helpers for tests that run workers: wait on conditions and worker events, never on sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import chronoq
from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.testing import WorkerSignals
from chronoq.worker.source import JobSource

T = TypeVar("T")

_PAUSE = threading.Event()  # never set: a pause that reads as what it is, a bounded poll


# When a held job built by `held_job` was due and started.
HELD_SINCE = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)


def held_job(job_id: int = 7, *, token: int = 1, attempts: int = 1) -> Job:
    """A job row as a worker holds it while its attempt runs: claimed by worker "w", lease
    token `token`, attempt `attempts` of 3, due and started at `HELD_SINCE`."""
    return Job(
        id=job_id,
        queue="q",
        task="t",
        payload={},
        status=JobStatus.RUNNING,
        priority=0,
        run_at=HELD_SINCE,
        attempts=attempts,
        max_attempts=3,
        lease_seconds=60.0,
        lease_token=token,
        locked_until=None,
        worker_id="w",
        key=None,
        errors=[],
        created_at=HELD_SINCE,
        started_at=HELD_SINCE,
        finished_at=None,
    )


def wait_until(predicate: Callable[[], T], timeout: float = 20.0, what: str = "") -> T:
    """Poll `predicate` until it returns something truthy, and return that; fail with `what`
    when `timeout` passes."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        _PAUSE.wait(delay)
        delay = min(delay * 2, 0.1)
    return value


@dataclass
class RecordingSignals(WorkerSignals):
    """Worker signals recorded under a condition variable, so tests can wait for them."""

    claims: list[Job] = field(default_factory=list)
    finishes: list[tuple[Job, Outcome, bool]] = field(default_factory=list)
    cancels: list[Job] = field(default_factory=list)
    idles: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def claimed(self, jobs: Sequence[Job]) -> None:
        with self.changed:
            self.claims.extend(jobs)
            self.changed.notify_all()

    def finished(self, job: Job, outcome: Outcome, accepted: bool) -> None:
        with self.changed:
            self.finishes.append((job, outcome, accepted))
            self.changed.notify_all()

    def cancelled(self, job: Job) -> None:
        with self.changed:
            self.cancels.append(job)
            self.changed.notify_all()

    def idle(self) -> None:
        with self.changed:
            self.idles += 1
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, timeout):
                raise AssertionError(f"timed out after {timeout}s waiting on worker signals")


@contextmanager
def running_worker(
    app: chronoq.App,
    options: chronoq.WorkerOptions | None = None,
    *,
    wrap_source: Callable[[JobSource], JobSource] | None = None,
) -> Iterator[tuple[chronoq.Worker, RecordingSignals]]:
    """A worker on a background thread, stopped (gracefully) when the block ends; with
    `wrap_source`, its job source is what that makes of the one it was built with."""
    signals = RecordingSignals()
    worker = chronoq.Worker(app, options, [signals])
    if wrap_source is not None:
        worker.source = wrap_source(worker.source)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run(install_signal_handlers=False)
        except BaseException as exc:  # surfaced to the test below
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker, signals
    finally:
        worker.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "worker did not stop"
        if errors:
            raise errors[0]
