"""The one error tree of chronoq.

```
ChronoqError                      base of every error chronoq raises on purpose
├── ConfigError                   a setting is missing, malformed or out of range
│   ├── InvalidDSN                a DSN chronoq cannot use (its password is never echoed)
│   └── InvalidSchedule           a bad cron expression, interval, time zone or misfire setting
├── StoreError                    the store failed to do what was asked
│   ├── StoreUnavailable          the database cannot be reached
│   ├── SchemaMissing             the tables are not there: run `chronoq migrate`
│   └── KeyConflict               a requeued job's key is held by another live job
├── EnqueueError                  a job was refused at enqueue; nothing was stored
│   ├── UnknownTask               no task of that name is registered with the app
│   ├── UnknownQueue              no task of the app uses that queue
│   ├── NaiveDatetime             a datetime without a time zone
│   ├── InvalidPayload            not a JSON object, or it does not fit the handler's signature
│   └── PayloadTooLarge           the encoded payload is over the configured limit
├── CoordinationUnavailable       the coordination service (etcd) cannot be reached
├── ExtraMissing                  a command needs an optional extra that is not installed
├── InvalidDuration               a duration such as "10s" or "5m" could not be read
├── NotFound                      what an admin operation names does not exist
│   ├── JobNotFound               no job with that id
│   ├── ScheduleNotFound          no schedule with that name
│   ├── QueueNotFound             no queue of that name is known (declared, with jobs or settings)
│   └── KeyLimitNotFound          the queue has no key limit with that pattern
├── Conflict                      what an admin operation names is in a state that forbids it
│   ├── JobFinished               the job has already ended, so it cannot be cancelled
│   └── QueueNotEmpty             the queue has pending or running jobs, so it is kept
├── JobLost                       the worker no longer owns the job (its lease token is stale)
├── JobCancelled                  the job was cancelled while the attempt ran (not a failure)
├── JobTimeout                    an attempt ran past its task's timeout (kept in the job's errors)
├── InvalidOutput                 a handler's return value cannot be stored (the attempt fails)
│   └── OutputTooLarge            the encoded return value is over the output limit
├── JobNotDone                    `App.wait`: the job ended without output
│   ├── JobFailed                 it is dead: its attempts ran out, or it cannot run
│   ├── JobWasCancelled           it was cancelled (by an operator, a Discard, its schedule)
│   └── JobSkipped                its misfire policy skipped it
└── WaitTimeout                   `App.wait`: the job had not ended when the timeout passed
```

Control flow raised by handlers is kept apart from failures (see `chronoq.Retry` and
`chronoq.Discard`): they are not errors and do not inherit from `ChronoqError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chronoq.core.jobs import Job


class ChronoqError(Exception):
    """chronoq failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(ChronoqError):
    """A setting is missing, malformed or out of range."""


class InvalidDSN(ConfigError):
    """The DSN is not one chronoq can use."""


class InvalidSchedule(ConfigError):
    """The schedule cannot be used: a bad cron expression, interval, time zone or misfire setting."""  # noqa: E501 - the docstring is the default message, kept on one line


class StoreError(ChronoqError):
    """The store failed to do what was asked."""


class StoreUnavailable(StoreError):
    """The database cannot be reached."""


class SchemaMissing(StoreError):
    """The chronoq tables are missing: run `chronoq migrate` first."""


class KeyConflict(StoreError):
    """The job's key is already held by another live job."""


class EnqueueError(ChronoqError):
    """The job was refused; nothing was stored."""


class UnknownTask(EnqueueError):
    """No task of that name is registered."""


class UnknownQueue(EnqueueError):
    """No registered task uses that queue."""


class NaiveDatetime(EnqueueError):
    """The datetime has no time zone; pass an aware datetime."""


class InvalidPayload(EnqueueError):
    """The payload is not a JSON object that fits the handler."""


class PayloadTooLarge(EnqueueError):
    """The encoded payload is larger than the configured limit."""


class CoordinationUnavailable(ChronoqError):
    """The coordination service (etcd) cannot be reached."""


class ExtraMissing(ChronoqError):
    """This needs an optional part of chronoq that is not installed."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(f"{feature} needs the {extra} extra: pip install 'chronoq[{extra}]'")
        self.extra = extra


class InvalidDuration(ChronoqError):
    """The duration could not be read; use forms like 30s, 5m, 2h, 7d or 1h30m."""


class NotFound(ChronoqError):
    """Nothing has that id or name. `suggestion` is the tail of the message that names the
    closest known name ("; did you mean 'x'?"), or "" when there is none, for a front end that
    words the rest of the sentence its own way."""

    def __init__(self, message: str | None = None, *, suggestion: str = "") -> None:
        super().__init__(message)
        self.suggestion = suggestion


class JobNotFound(NotFound):
    """No job has that id."""


class ScheduleNotFound(NotFound):
    """No schedule has that name."""


class QueueNotFound(NotFound):
    """No queue of that name is known: none is declared by the app, has jobs or has settings."""


class KeyLimitNotFound(NotFound):
    """The queue has no key limit with that pattern."""


class Conflict(ChronoqError):
    """What the operation names is in a state that forbids it."""


class JobFinished(Conflict):
    """The job has already ended (done, dead, cancelled or skipped); only pending or running
    jobs can be cancelled. `job` is the job as it is now."""

    def __init__(self, job: Job, message: str | None = None) -> None:
        self.job = job
        super().__init__(
            message
            or f"job {job.id} is {job.status}; only pending or running jobs can be cancelled"
        )


class QueueNotEmpty(Conflict):
    """The queue has pending or running jobs; its settings are kept."""


class JobLost(ChronoqError):
    """The worker no longer owns this job: its lease expired and the job was claimed again."""


class JobCancelled(ChronoqError):
    """The job was cancelled while this attempt ran; the attempt ends cancelled, with no retry."""


class Retry(Exception):
    """Raised by a handler to run the job again after `delay` seconds (an attempt is used)."""

    def __init__(self, delay: float | None = None, reason: str = "") -> None:
        super().__init__(reason or "retry requested")
        self.delay = delay
        self.reason = reason


class Discard(Exception):
    """Raised by a handler to stop the job for good: it ends `cancelled` with the reason."""

    def __init__(self, reason: str = "discarded by handler") -> None:
        super().__init__(reason)
        self.reason = reason


class JobTimeout(ChronoqError):
    """The attempt ran past its task's timeout."""


class InvalidOutput(ChronoqError):
    """The handler's return value cannot be stored as the job's output (it must be JSON)."""


class OutputTooLarge(InvalidOutput):
    """The handler's return value, encoded as JSON, is larger than the output limit."""


class JobNotDone(ChronoqError):
    """The job ended without output. `job` is the job as it ended; `error`, the record of its
    last failed or cancelled attempt (None when it has none)."""

    def __init__(self, job: Job, message: str | None = None) -> None:
        self.job = job
        self.error: dict[str, Any] | None = job.errors[-1] if job.errors else None
        super().__init__(message or _ended_message(job, self.error))


class JobFailed(JobNotDone):
    """The job is dead: its attempts ran out, or it could not run at all."""


class JobWasCancelled(JobNotDone):
    """The job was cancelled before it was done."""


class JobSkipped(JobNotDone):
    """The job was skipped: it was picked up later than its misfire grace allowed."""


class WaitTimeout(ChronoqError, TimeoutError):
    """The job had not ended when the wait timed out; it may still end later."""

    def __init__(self, job_id: int, status: str, timeout: float) -> None:
        self.job_id = job_id
        self.status = status
        super().__init__(f"job {job_id} is still {status} after waiting {timeout:g}s")


def _ended_message(job: Job, error: dict[str, Any] | None) -> str:
    message = f"job {job.id} ({job.task}) ended {job.status}"
    if error is None:
        return message
    kind, text = error.get("error") or "", error.get("message") or ""
    detail = f"{kind}: {text}" if kind and text else kind or text
    return f"{message} after attempt {error.get('attempt', job.attempts)}: {detail}"
