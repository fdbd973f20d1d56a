"""chronoq: a distributed job scheduler for Python, on PostgreSQL or embedded SQLite.

```python
import chronoq

app = chronoq.App()  # CHRONOQ_DSN, default sqlite:///chronoq.db

@app.task(queue="emails", max_attempts=8, backoff=chronoq.Backoff(base=2, cap=3600), lease=60)
def send_email(ctx: chronoq.JobContext, to: str, subject: str) -> None: ...

send_email.defer(to="a@example.com", subject="hi")
send_email.configure(delay="4h").defer(to="b@example.com", subject="hi")
```
"""

import importlib.metadata

from chronoq.app import App
from chronoq.config import Config
from chronoq.core.backoff import Backoff
from chronoq.core.enqueue import Enqueued, JobSpec
from chronoq.core.jobs import Job, JobProgress, JobStatus, Outcome, Stat
from chronoq.core.misfire import MisfirePolicy
from chronoq.core.schedules import Schedule, ScheduleSpec
from chronoq.deferrer import Deferrer
from chronoq.errors import (
    ChronoqError,
    ConfigError,
    Conflict,
    Discard,
    EnqueueError,
    InvalidDSN,
    InvalidDuration,
    InvalidOutput,
    InvalidPayload,
    InvalidSchedule,
    JobCancelled,
    JobFailed,
    JobFinished,
    JobLost,
    JobNotDone,
    JobNotFound,
    JobSkipped,
    JobTimeout,
    JobWasCancelled,
    KeyConflict,
    KeyLimitNotFound,
    NaiveDatetime,
    NotFound,
    OutputTooLarge,
    PayloadTooLarge,
    QueueNotEmpty,
    QueueNotFound,
    Retry,
    ScheduleNotFound,
    SchemaMissing,
    StoreError,
    StoreUnavailable,
    UnknownQueue,
    UnknownTask,
    WaitTimeout,
)
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.task import Task
from chronoq.worker.context import JobContext
from chronoq.worker.stats import WorkerStats
from chronoq.worker.worker import Worker, WorkerOptions

# pyproject.toml is the one place the version is written.
__version__ = importlib.metadata.version("chronoq")

__all__ = [
    "App",
    "Backoff",
    "ChronoqError",
    "Config",
    "ConfigError",
    "Conflict",
    "Deferrer",
    "Discard",
    "EnqueueError",
    "Enqueued",
    "InvalidDSN",
    "InvalidDuration",
    "InvalidOutput",
    "InvalidPayload",
    "InvalidSchedule",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobFinished",
    "JobLost",
    "JobNotDone",
    "JobNotFound",
    "JobProgress",
    "JobSkipped",
    "JobSpec",
    "JobStatus",
    "JobTimeout",
    "JobWasCancelled",
    "KeyConflict",
    "KeyLimitNotFound",
    "MisfirePolicy",
    "NaiveDatetime",
    "NotFound",
    "Outcome",
    "OutputTooLarge",
    "PayloadTooLarge",
    "QueueNotEmpty",
    "QueueNotFound",
    "Retry",
    "Schedule",
    "ScheduleNotFound",
    "ScheduleSpec",
    "Scheduler",
    "SchedulerOptions",
    "SchemaMissing",
    "Stat",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "UnknownQueue",
    "UnknownTask",
    "WaitTimeout",
    "Worker",
    "WorkerOptions",
    "WorkerStats",
    "__version__",
]
