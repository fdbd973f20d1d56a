"""The admin API: every operation an operator performs on jobs, dead letters, schedules and
queues, written once for every front end.

```python
app.admin.cancel_job(42)          # JobNotFound, or JobFinished when it has ended
app.admin.requeue_dead(DeadRequeueParams(ids=None, queue="emails"))
app.admin.pause_queue("emials")   # QueueNotFound: "unknown queue 'emials'; did you mean 'emails'?"
app.admin.trigger_schedule("nightly")
```

The HTTP API, the dashboard and the CLI parse their input, call one method here and turn what
it returns or raises into a status code, a flash message or an exit code and a line. So each
check lives here once: names are checked (`check_name`) before the store sees them, a name that
matches nothing is `NotFound` with the closest known name, and an operation that the state of
what it names forbids is a `Conflict`:

```
 operation                    not found                      conflict
 get_job / cancel_job         JobNotFound                    JobFinished (cancel_job)
 *_schedule                   ScheduleNotFound
 pause/resume/limit queue     QueueNotFound (unless create)
 unlimit_key                  KeyLimitNotFound
 remove_queue                 QueueNotFound                  QueueNotEmpty
```

A malformed input (a name with control characters, a negative age) is a `ConfigError`, as
everywhere else in chronoq.

Which queues exist: a queue springs into being wherever a name is used, so a command that
stores settings for a name nobody uses would leave a queue behind that shows on the dashboard
and in /metrics for good. A queue is *known* when any of these names it:

```
  the app ─── its tasks' queues, its declared limits and key limits
  the store ─ queues with jobs (of any status), queues with stored settings
```

Pausing or limiting a queue that is not known is refused, unless the caller asks for it on
purpose (`create`); `remove_queue` takes a queue's settings away again once it has no pending
or running jobs.

Every change made here is one `Administered` event to the app's observers, and one line on the
`chronoq.admin` logger ("job.cancel job 42: cancelled"), whichever front end asked for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from chronoq.core.enqueue import Enqueued, JobSpec, did_you_mean
from chronoq.core.jobs import Job, JobStatus, Stat
from chronoq.core.schedules import Schedule
from chronoq.core.validate import check_key, check_name
from chronoq.errors import (
    ConfigError,
    JobFinished,
    JobNotFound,
    KeyLimitNotFound,
    QueueNotEmpty,
    QueueNotFound,
    ScheduleNotFound,
)
from chronoq.fleet.records import Fleet
from chronoq.observability.eventlog import EventLog
from chronoq.observability.events import Administered, Observers
from chronoq.scheduling import key_limit, queue_limit_params
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    DeadRequeueResult,
    JobListParams,
    JobStore,
    OverviewParams,
    ProcessListParams,
    QueueCounts,
    QueueRemoval,
    QueueSettings,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from chronoq.core.ratelimit import KeyLimit
    from chronoq.storage.base import QueueLimitParams


class AdminOwner(Protocol):
    """What the admin uses of its app: the store, the queues it declares, and the producer API
    for `trigger`."""

    @property
    def store(self) -> JobStore: ...
    @property
    def queues(self) -> list[str]: ...
    @property
    def limits(self) -> Mapping[str, QueueLimitParams]: ...
    @property
    def key_limits(self) -> Mapping[tuple[str, str], KeyLimit]: ...

    def enqueue_many(self, specs: Iterable[JobSpec], *, conn: Any = None) -> list[Enqueued]: ...

    @property
    def observers(self) -> Observers: ...


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue's stored settings (defaults when it has none) and its job counts now."""

    settings: QueueSettings
    counts: QueueCounts

    @property
    def name(self) -> str:
        return self.settings.name


class Admin:
    """The operations on what an app's store holds; reached as `app.admin`. Opening it opens
    nothing: the store is opened by the first operation, as the app's own."""

    def __init__(self, app: AdminOwner) -> None:
        self._app = app
        # Logged here, and heard by the app's observers (its metrics, a test's signals).
        self._events = Observers([EventLog()], app.observers)

    def _did(self, action: str, target: str, result: str) -> None:
        self._events.emit(Administered(action, target, result))

    @property
    def _store(self) -> JobStore:
        return self._app.store

    # -- jobs -----------------------------------------------------------------------------

    def get_job(self, job_id: int) -> Job:
        job = self._store.job_get(job_id)
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        return job

    def list_jobs(self, params: JobListParams) -> list[Job]:
        """Jobs newest first; the queue, task and key filters are checked first."""
        return self._store.job_list(_checked_search(params))

    def cancel_job(self, job_id: int) -> Job:
        """Cancel a pending or running job and return it. A job that has already ended,
        cancelled ones included, is a `JobFinished` carrying the job as it is: the caller
        learns that this request did not cancel it."""
        before = self.get_job(job_id)
        if before.status.is_final:
            raise JobFinished(before)
        job = self._store.job_cancel(job_id)
        if job is None:  # purged between the two statements
            raise JobNotFound(f"no job with id {job_id}")
        if job.status is not JobStatus.CANCELLED:  # it ended between the two statements
            raise JobFinished(job)
        self._did("job.cancel", f"job {job_id}", f"cancelled (was {before.status})")
        return job

    # -- dead letters ---------------------------------------------------------------------

    def list_dead(self, params: JobListParams) -> list[Job]:
        """Dead jobs newest first, narrowed as `params` says (whatever statuses it names)."""
        return self.list_jobs(dataclasses.replace(params, statuses=(JobStatus.DEAD,)))

    def requeue_dead(self, params: DeadRequeueParams) -> DeadRequeueResult:
        """Requeue dead jobs (every dead job of the filters when `params.ids` is None): they
        start over with all their attempts. The result says what became of each."""
        _check_filter("queue", params.queue)
        _check_filter("task", params.task)
        result = self._store.dead_requeue(params)
        self._did("dead.requeue", _dead_jobs(params.ids, params.queue), _requeued(result))
        return result

    def purge_dead(self, params: DeadPurgeParams) -> int:
        """Delete dead jobs for good; the number deleted."""
        _check_filter("queue", params.queue)
        _check_filter("task", params.task)
        if params.older_than < timedelta(0):
            raise ConfigError("the age of the dead jobs to purge must not be negative")
        purged = self._store.dead_purge(params)
        target = _dead_jobs(params.ids, params.queue)
        if params.older_than:
            target += f" dead longer than {params.older_than}"
        self._did("dead.purge", target, f"purged {purged}")
        return purged

    # -- schedules ------------------------------------------------------------------------

    def list_schedules(self) -> list[Schedule]:
        return self._store.schedule_list()

    def get_schedule(self, name: str) -> Schedule:
        schedule = self._store.schedule_get(check_name("schedule", name))
        if schedule is None:
            raise self._schedule_not_found(name)
        return schedule

    def pause_schedule(self, name: str) -> Schedule:
        """Pause: its tick jobs not yet due are cancelled."""
        return self._schedule_paused(name, paused=True)

    def resume_schedule(self, name: str) -> Schedule:
        """Resume from now: ticks that fell in the pause are not missed ticks."""
        return self._schedule_paused(name, paused=False)

    def remove_schedule(self, name: str) -> None:
        """Delete the schedule; its pending tick jobs are cancelled."""
        if not self._store.schedule_remove(check_name("schedule", name)):
            raise self._schedule_not_found(name)
        self._did("schedule.remove", f"schedule {name}", "removed")

    def trigger_schedule(self, name: str) -> Enqueued:
        """Enqueue a stored schedule's job now, as a one-off job outside its cadence: same
        task, payload, queue and priority; the schedule's cursor and counters stay."""
        schedule = self.get_schedule(name)
        spec = JobSpec(
            schedule.task, schedule.payload, queue=schedule.queue, priority=schedule.priority
        )
        enqueued = self._app.enqueue_many([spec])[0]
        self._did("schedule.trigger", f"schedule {name}", f"enqueued job {enqueued.id}")
        return enqueued

    def _schedule_paused(self, name: str, *, paused: bool) -> Schedule:
        schedule = self._store.schedule_pause(check_name("schedule", name), paused)
        if schedule is None:
            raise self._schedule_not_found(name)
        action, done = ("schedule.pause", "paused") if paused else ("schedule.resume", "resumed")
        self._did(action, f"schedule {name}", done)
        return schedule

    def _schedule_not_found(self, name: str) -> ScheduleNotFound:
        hint = did_you_mean(name, (s.name for s in self._store.schedule_list()))
        return ScheduleNotFound(f"no schedule named {name!r}{hint}", suggestion=hint)

    # -- queues ---------------------------------------------------------------------------

    def known_queues(self) -> set[str]:
        """Every queue the app declares or the store has jobs or settings for."""
        app = self._app
        declared = {*app.queues, *app.limits, *(queue for queue, _ in app.key_limits)}
        return declared | set(self._store.queue_names())

    def list_queue_settings(self) -> list[QueueSettings]:
        """The queues with stored settings."""
        return self._store.queue_list()

    def list_queues(self) -> list[QueueState]:
        """Every queue with jobs or stored settings, by name: its settings and counts now."""
        settings = {q.name: q for q in self._store.queue_list()}
        # A window of nothing: the counts now, without reading any finished job.
        overview = self._store.overview(OverviewParams(window=0.0))
        counts = {q.queue: q for q in overview.queues}
        return [
            QueueState(
                settings.get(name) or QueueSettings(name), counts.get(name) or QueueCounts(name)
            )
            for name in sorted(settings.keys() | counts.keys())
        ]

    def get_queue(self, name: str) -> QueueState:
        """One queue as `list_queues` shows it (settings and counts of nothing if it has none)."""
        check_name("queue", name)
        found = (state for state in self.list_queues() if state.name == name)
        return next(found, QueueState(QueueSettings(name), QueueCounts(name)))

    def pause_queue(self, name: str, *, create: bool = False) -> QueueSettings:
        """Stop claims from a known queue (any valid name with `create`)."""
        settings = self._store.queue_pause(self._queue_to_change(name, create=create), True)
        self._did("queue.pause", f"queue {name}", "paused")
        return settings

    def resume_queue(self, name: str) -> QueueSettings:
        settings = self._store.queue_pause(self._queue_to_change(name), False)
        self._did("queue.resume", f"queue {name}", "resumed")
        return settings

    def limit_queue(
        self,
        name: str,
        *,
        rate: str | None = None,
        burst: float | None = None,
        concurrency: int | None = None,
        create: bool = False,
    ) -> QueueSettings:
        """Set a queue's rate ("200/s", with a bucket of `burst` jobs) and concurrency; each
        left out is removed."""
        params = queue_limit_params(name, rate, burst, concurrency)
        self._queue_to_change(name, create=create)
        settings = self._store.queue_limit(params)
        shown = f"rate {rate or 'none'}, burst {burst or 'default'}, concurrency {concurrency}"
        self._did("queue.limit", f"queue {name}", shown)
        return settings

    def limit_key(
        self,
        queue: str,
        pattern: str,
        *,
        rate: str,
        burst: float | None = None,
        create: bool = False,
    ) -> QueueSettings:
        """Give each rate key of the queue matching the glob `pattern` a bucket of its own."""
        limit = key_limit(pattern, rate, burst)
        settings = self._store.key_limit_set(self._queue_to_change(queue, create=create), limit)
        self._did("queue.limit_key", f"queue {queue} keys {pattern}", f"rate {rate}")
        return settings

    def unlimit_key(self, queue: str, pattern: str) -> QueueSettings:
        """Remove a key limit; the queue's settings as they are now."""
        if not self._store.key_limit_remove(check_name("queue", queue), pattern):
            patterns = (k.pattern for k in self._store.queue_get(queue).key_limits)
            hint = did_you_mean(pattern, patterns)
            message = f"queue {queue!r} has no key limit {pattern!r}{hint}"
            raise KeyLimitNotFound(message, suggestion=hint)
        self._did("queue.unlimit_key", f"queue {queue} keys {pattern}", "removed")
        return self._store.queue_get(queue)

    def remove_queue(self, name: str) -> QueueRemoval:
        """Delete a known queue's stored settings; refused while it has pending or running jobs."""
        removal = self._store.queue_remove(self._queue_to_change(name))
        if removal.busy:
            raise QueueNotEmpty(
                f"queue {name!r} has {removal.pending} pending and {removal.running} running "
                "job(s): wait for them to finish, or cancel them, then remove it"
            )
        self._did("queue.remove", f"queue {name}", "removed" if removal.removed else "had none")
        return removal

    def _queue_to_change(self, name: str, *, create: bool = False) -> str:
        """`name`, checked: a queue name that is known, or any valid one with `create`."""
        check_name("queue", name)
        if create:
            return name
        known = self.known_queues()
        if name not in known:
            hint = did_you_mean(name, known)
            raise QueueNotFound(f"unknown queue {name!r}{hint}", suggestion=hint)
        return name

    # -- what the store holds, in figures -------------------------------------------------

    def stats(self) -> list[Stat]:
        """Jobs per queue and status."""
        return self._store.stats()

    def list_processes(self, *, every: bool = False) -> Fleet:
        """The fleet registry's live processes; with `every`, those of the last day too."""
        return self._store.process_list(ProcessListParams(all=every))


def _check_filter(kind: str, value: str | None) -> None:
    """A queue or task to narrow by: None matches any, any other value must be a name (an
    empty one would otherwise reach the store, where it matches nothing, or worse)."""
    if value is not None:
        check_name(kind, value)


def _checked_search(params: JobListParams) -> JobListParams:
    _check_filter("queue", params.queue)
    _check_filter("task", params.task)
    check_key(params.key)
    return params


def _dead_jobs(ids: Sequence[int] | None, queue: str | None) -> str:
    """What a requeue or purge of dead jobs asked for, for its log line."""
    chosen = "every dead job" if ids is None else f"dead jobs {', '.join(map(str, ids))}"
    return chosen if queue is None else f"{chosen} of queue {queue}"


def _requeued(result: DeadRequeueResult) -> str:
    parts = [f"requeued {len(result.requeued)}"]
    for count, what in (
        (len(result.key_conflicts), "kept dead (key held)"),
        (len(result.not_dead), "not dead"),
        (len(result.not_found), "not found"),
    ):
        if count:
            parts.append(f"{count} {what}")
    return ", ".join(parts)
