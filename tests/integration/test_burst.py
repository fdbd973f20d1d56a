"""Burst mode ends only when a claim sent with nothing held finds nothing due."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pytest

import chronoq
from chronoq.core.jobs import Job
from chronoq.observability.events import AttemptsEnded, Subscription
from chronoq.worker.source import JobSource, Taken

WAIT = 30.0


class AnsweredAfterReport:
    """A job source whose second claim runs while the first job is still held, and answers only
    once that job's result is stored: the claim saw the table before the retry was written."""

    def __init__(self, inner: JobSource, claim_sent: threading.Event) -> None:
        self.inner = inner
        self.claim_sent = claim_sent
        self.reported = threading.Event()
        self.takes = 0

    def start(self, wake: Callable[[], None]) -> None:
        self.inner.start(wake)

    def take(self, limit: int) -> Taken:
        self.takes += 1
        taken = self.inner.take(limit)
        if self.takes == 1:
            return Taken(taken.jobs, ready=True)
        if self.takes == 2:
            self.claim_sent.set()
            assert self.reported.wait(WAIT), "the first attempt's result was never stored"
        return taken

    def give_back(self, jobs: Sequence[Job]) -> set[int]:
        return self.inner.give_back(jobs)

    def close(self) -> None:
        self.inner.close()

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return [Subscription(AttemptsEnded, lambda _: self.reported.set())]


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    with chronoq.App(dsn) as application:
        yield application


def test_a_retry_stored_while_a_claim_was_out_runs_before_the_burst_ends(
    app: chronoq.App,
) -> None:
    claim_sent = threading.Event()

    @app.task(max_attempts=3)
    def flaky(ctx: chronoq.JobContext) -> None:
        if ctx.attempt == 1:
            assert claim_sent.wait(WAIT), "the worker never claimed again while this ran"
            raise chronoq.Retry(delay=0)

    flaky.defer()
    worker = chronoq.Worker(app, chronoq.WorkerOptions(burst=True, concurrency=2))
    source = AnsweredAfterReport(worker.source, claim_sent)
    worker.source = source
    worker.events.subscribe(source)
    stats = worker.run(install_signal_handlers=False)
    assert (stats.retried, stats.done) == (1, 1)
