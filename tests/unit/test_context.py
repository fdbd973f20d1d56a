"""JobContext: what a handler learns of a cancel, and how its heartbeat tells a cancel from a
lost lease; the log line and the executor's side of it."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

import chronoq
from chronoq.core.jobs import Job, JobProgress, Outcome
from chronoq.observability.eventlog import EventLog
from chronoq.observability.events import AttemptCancelled, Observers
from chronoq.storage.base import JobHeartbeatResult, JobLeaseRef, JobStore
from chronoq.worker.attempts import Attempt
from chronoq.worker.executor import Executor
from tests.helpers import held_job


def running_job() -> Job:
    return held_job(7, token=4, attempts=2)


class HeartbeatAnswers:
    """The one store method a heartbeat calls, answering what the test says."""

    def __init__(self, answer: JobHeartbeatResult) -> None:
        self.answer = answer
        self.calls: list[list[JobLeaseRef]] = []
        self.progress: list[Mapping[int, JobProgress] | None] = []

    def job_heartbeat_many(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress] | None = None
    ) -> JobHeartbeatResult:
        self.calls.append(list(refs))
        self.progress.append(progress)
        return self.answer


def context(answer: JobHeartbeatResult | None = None) -> tuple[chronoq.JobContext, Any]:
    store = HeartbeatAnswers(answer or JobHeartbeatResult())
    fenced: list[str] = []
    ctx = chronoq.JobContext(running_job(), "w", cast(JobStore, store), on_fenced=fenced.append)
    return ctx, (store, fenced)


def test_a_context_starts_not_cancelled() -> None:
    ctx, _ = context()
    assert ctx.cancelled is False
    ctx.raise_if_cancelled()


def test_once_marked_cancelled_it_says_so_and_raises_job_cancelled() -> None:
    ctx, _ = context()
    marker = threading.Thread(target=ctx.mark_cancelled)
    marker.start()
    marker.join()
    assert ctx.cancelled is True
    with pytest.raises(chronoq.JobCancelled, match="job 7 was cancelled while attempt 2 ran"):
        ctx.raise_if_cancelled()
    assert issubclass(chronoq.JobCancelled, chronoq.ChronoqError)
    assert not issubclass(chronoq.JobCancelled, chronoq.JobLost)


def test_a_heartbeat_that_renews_the_lease_returns() -> None:
    ctx, (store, fenced) = context(JobHeartbeatResult(renewed={7}))
    ctx.heartbeat()
    assert store.calls == [[JobLeaseRef(7, 4)]]
    assert (ctx.cancelled, ctx.lost, fenced) == (False, False, [])


def test_a_heartbeat_that_finds_the_job_cancelled_raises_job_cancelled_not_lost() -> None:
    ctx, (_, fenced) = context(JobHeartbeatResult(cancelled={7}))
    with pytest.raises(chronoq.JobCancelled):
        ctx.heartbeat()
    assert (ctx.cancelled, ctx.lost, fenced) == (True, False, [])


def test_a_refused_heartbeat_is_a_lost_lease() -> None:
    ctx, (_, fenced) = context(JobHeartbeatResult())
    with pytest.raises(chronoq.JobLost):
        ctx.heartbeat()
    assert (ctx.cancelled, ctx.lost, fenced) == (False, True, ["heartbeat"])


def test_a_heartbeat_after_the_cancel_is_known_asks_nobody() -> None:
    ctx, (store, _) = context(JobHeartbeatResult(renewed={7}))
    ctx.mark_cancelled()
    with pytest.raises(chronoq.JobCancelled):
        ctx.heartbeat()
    assert store.calls == []


def test_the_worker_log_says_a_job_was_cancelled_while_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="chronoq.worker")
    events = Observers([EventLog()])
    events.emit(AttemptCancelled("w", running_job(), interrupted=True))
    events.emit(AttemptCancelled("w", running_job(), interrupted=False))
    events.emit(AttemptCancelled("w", running_job(), interrupted=False, started=False))
    assert [r.getMessage() for r in caplog.records] == [
        "job 7 t was cancelled while running; its handler was interrupted",
        "job 7 t was cancelled while running; its handler is told (ctx.cancelled) and its "
        "result will be discarded",
        "job 7 t was cancelled while running; it had not started, and will not",
    ]
    assert {getattr(r, "action", None) for r in caplog.records} == {"job.cancelled_running"}


def test_an_attempt_cancelled_before_it_starts_never_calls_its_handler(tmp_path: Path) -> None:
    """A job claimed ahead and cancelled while it waited for a slot ends cancelled unrun."""
    app = chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    called: list[int] = []

    @app.task
    def t() -> None:
        called.append(1)

    ctx, _ = context()
    ctx.mark_cancelled()
    with ThreadPoolExecutor(max_workers=1) as pool, app:
        params = asyncio.run(Executor(app.tasks, pool).run(Attempt(ctx.job, ctx)))
    assert params is not None
    assert (params.outcome, called) == (Outcome.CANCELLED, [])
    assert params.error is not None and params.error["error"] == "chronoq.errors.JobCancelled"


# -- progress ---------------------------------------------------------------------------------


def test_progress_is_buffered_until_a_heartbeat_carries_it() -> None:
    ctx, (store, _) = context(JobHeartbeatResult(renewed={7}))
    ctx.progress(0.25)
    ctx.progress(0.4, note="3 of 8 files")
    assert store.calls == []  # no round trip per report
    assert ctx.last_progress == JobProgress(0.4, "3 of 8 files")
    ctx.heartbeat()
    assert store.progress == [{7: JobProgress(0.4, "3 of 8 files")}]
    assert ctx.unsent_progress() is None
    ctx.heartbeat()
    assert store.progress[-1] is None  # sent once


def test_progress_a_refused_heartbeat_did_not_store_is_sent_again() -> None:
    ctx, _ = context(JobHeartbeatResult(cancelled={7}))
    ctx.progress(0.5)
    with pytest.raises(chronoq.JobCancelled):
        ctx.heartbeat()
    assert ctx.unsent_progress() == (1, JobProgress(0.5))


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_progress_refuses_a_fraction_outside_zero_to_one(fraction: Any) -> None:
    ctx, _ = context()
    with pytest.raises(ValueError, match="progress must be a number from 0 to 1"):
        ctx.progress(fraction)
    assert ctx.last_progress is None


def test_progress_accepts_both_ends_and_integers() -> None:
    ctx, _ = context()
    ctx.progress(0)
    assert ctx.last_progress == JobProgress(0.0)
    ctx.progress(1, note="")
    assert ctx.last_progress == JobProgress(1.0, "")


@pytest.mark.parametrize(
    ("note", "message"),
    [
        ("x" * 201, "at most 200 characters, got 201"),
        (42, "must be text, got int"),
        ("a\x00b", "NUL"),
        ("\ud800", "lone surrogates"),
    ],
)
def test_progress_refuses_a_bad_note(note: Any, message: str) -> None:
    ctx, _ = context()
    with pytest.raises(ValueError, match=message):
        ctx.progress(0.5, note=note)
