"""Helpers for testing code that uses chronoq, shipped for your own test suites.

```python
from chronoq.testing import assert_enqueued, drain

def test_signup_sends_a_welcome_email(app):
    signup("a@example.com")
    assert_enqueued(app, "send_email", to="a@example.com")
    stats = drain(app)                 # runs every due job inline, then returns
    assert stats.done == 1
```

`StaticElector()` (chronoq.coordination's) leads without an election:
`Scheduler(app, elector=StaticElector())` runs the leader-only services at once, and
`StaticElector(leader=False)` never does.

Use a throwaway database: `App("sqlite:///" + str(tmp_path / "jobs.db"))` costs a few
milliseconds and behaves exactly as production storage does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from chronoq.app import App
from chronoq.coordination import StaticElector
from chronoq.coordination.base import LeaderTerm
from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.observability.events import (
    AttemptCancelled,
    AttemptsEnded,
    JobsClaimed,
    LeaderChanged,
    ServiceRan,
    Subscription,
    WorkerIdle,
)
from chronoq.scheduler.services import CronEnqueuer
from chronoq.storage.base import JobListParams
from chronoq.worker.stats import WorkerStats
from chronoq.worker.worker import Worker, WorkerOptions

__all__ = [
    "SchedulerSignals",
    "StaticElector",
    "WorkerSignals",
    "assert_enqueued",
    "drain",
    "enqueued",
    "fire_schedules",
]


def drain(app: App, *, queues: Sequence[str] | None = None, concurrency: int = 4) -> WorkerStats:
    """Run a worker in burst mode on this thread: every due job runs, then it returns."""
    options = WorkerOptions(queues=queues, concurrency=concurrency, burst=True)
    return Worker(app, options).run(install_signal_handlers=False)


def enqueued(
    app: App, task: str | None = None, *, statuses: Sequence[JobStatus] = (JobStatus.PENDING,)
) -> list[Job]:
    """Jobs of `task` (or of every task) in the given states, oldest first."""
    jobs = app.store.job_list(JobListParams(statuses=statuses, task=task, limit=10_000))
    return sorted(jobs, key=lambda job: job.id)


def assert_enqueued(app: App, task: str, **payload: Any) -> Job:
    """Assert that a pending job of `task` exists whose payload contains `payload`; return it."""
    candidates = enqueued(app, task)
    for job in candidates:
        if all(key in job.payload and job.payload[key] == value for key, value in payload.items()):
            return job
    shown = [job.payload for job in candidates[:5]]
    raise AssertionError(
        f"no pending {task!r} job with payload containing {payload!r}; "
        f"{len(candidates)} pending {task!r} job(s){': ' + repr(shown) if shown else ''}"
    )


def fire_schedules(app: App) -> int:
    """Store the app's declared schedules and limits, then run one pass of the cron enqueuer
    (as the scheduler leader would): ticks due now or within its lookahead become jobs.
    Returns how many tick jobs were inserted."""
    app.sync()
    enqueuer = CronEnqueuer(app.runtime())
    enqueuer.run_once()
    return enqueuer.fired


class WorkerSignals:
    """An observer of a worker's events, as hooks to override in tests: pass an instance
    in `Worker(app, options, [signals])`, and wait on what the hooks record rather than on a
    sleep."""

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(JobsClaimed, lambda event: self.claimed(event.jobs)),
            Subscription(AttemptsEnded, self._ended),
            Subscription(WorkerIdle, lambda event: self.idle()),
            Subscription(AttemptCancelled, lambda event: self.cancelled(event.job)),
        )

    def _ended(self, event: AttemptsEnded) -> None:
        for end in event.ends:
            self.finished(end.job, end.outcome, end.accepted)

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Jobs were claimed."""

    def finished(self, job: Job, outcome: Outcome, accepted: bool) -> None:
        """The store recorded (accepted) or fenced off (not accepted) how an attempt ended."""

    def idle(self) -> None:
        """A claim round found nothing more to do for now."""

    def cancelled(self, job: Job) -> None:
        """A heartbeat found that a job this worker runs was cancelled: its handler is being
        stopped (see `JobContext.cancelled`)."""


class SchedulerSignals:
    """An observer of a scheduler's events, as hooks to override in tests:
    `Scheduler(app, observers=[signals])`."""

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(LeaderChanged, self._leader_changed),
            Subscription(ServiceRan, lambda event: self.ran(event.service)),
        )

    def _leader_changed(self, event: LeaderChanged) -> None:
        if event.term is None:
            self.deposed()
        else:
            self.elected(event.term)

    def elected(self, term: LeaderTerm) -> None:
        """This scheduler became the leader."""

    def deposed(self) -> None:
        """This scheduler stopped leading."""

    def ran(self, service: str) -> None:
        """A leader-only service finished a pass."""
