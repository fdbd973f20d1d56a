"""Helpers for testing code that uses chronoq, shipped for your own test suites.

```python
from chronoq.testing import assert_enqueued, drain

def test_signup_sends_a_welcome_email(app):
    signup("a@example.com")
    assert_enqueued(app, "send_email", to="a@example.com")
    stats = drain(app)                 # runs every due job inline, then returns
    assert stats.done == 1
```

Use a throwaway database: `App("sqlite:///" + str(tmp_path / "jobs.db"))` costs a few
milliseconds and behaves exactly as production storage does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chronoq.app import App
from chronoq.core.jobs import Job, JobStatus
from chronoq.storage.base import JobListParams
from chronoq.worker.worker import Worker, WorkerOptions, WorkerStats

__all__ = ["assert_enqueued", "drain", "enqueued"]


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
