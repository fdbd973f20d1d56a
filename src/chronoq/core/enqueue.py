"""Enqueue preparation: one job as its producer gives it, turned into what the store inserts.

Every producer takes the same single pass through `prepare`: `App.enqueue`, `enqueue_many`,
`Task.defer` (and its `configure`d form), the HTTP API's enqueue and batch enqueue, and
`chronoq enqueue`. It reads a `JobSpec`, fills in what the job leaves out from its task's
settings (or, for a task the producer does not know, from the app's defaults), and refuses bad
input with chronoq's own error naming the field. It reads nothing but its arguments and writes
nothing, so it is tested alone.

```
 JobSpec ──► prepare(spec, tasks, defaults) ──► PreparedJob ──► (app) store insert params
               │ task known?  queue used?  payload fits?  when, priority, attempts, misfire
               └─► UnknownTask, UnknownQueue, InvalidPayload, NaiveDatetime, ConfigError, ...
```
"""

from __future__ import annotations

import difflib
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, overload

from chronoq.core.misfire import RUN_LATE, Misfire, MisfirePolicy, job_misfire
from chronoq.core.validate import (
    PRIORITY_RANGE,
    PayloadShape,
    check_instant,
    check_int,
    check_key,
    check_name,
    delay_seconds,
    encode_payload,
    unique_for_seconds,
)
from chronoq.errors import ConfigError, UnknownQueue, UnknownTask

MAX_ATTEMPTS_LIMIT = 1000
_POLICY_TEXT = {policy: policy.value for policy in MisfirePolicy}  # `.value` is a slow property
# Old names of job options, in Python and in the HTTP API: given one, a caller is told the new
# name.
RENAMED_OPTIONS = {"at": "run_at"}


@dataclass(frozen=True, slots=True, init=False)
class JobSpec:
    """One job for `App.enqueue_many`: the task's name and payload, then its options by keyword.
    An option left as None takes the task's setting; `run_at` and `delay` left out mean now."""

    task: str
    payload: dict[str, Any] | None = None
    _: KW_ONLY
    run_at: datetime | None = None
    delay: timedelta | float | str | None = None
    queue: str | None = None
    key: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    misfire: str | None = None
    misfire_grace: timedelta | float | str | None = None
    rate_key: str | None = None
    unique_for: timedelta | float | str | None = None

    def __init__(
        self,
        task: str,
        payload: dict[str, Any] | None = None,
        *,
        run_at: datetime | None = None,
        delay: timedelta | float | str | None = None,
        queue: str | None = None,
        key: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        misfire: str | None = None,
        misfire_grace: timedelta | float | str | None = None,
        rate_key: str | None = None,
        unique_for: timedelta | float | str | None = None,
    ) -> None:
        # The generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__, by name: 1.35 µs a JobSpec, built serially before a bulk
        # enqueue's first row leaves. Each slot's own descriptor sets it in 0.8 µs.
        # tests/unit/test_enqueue.py holds this signature to the fields.
        (
            set_task,
            set_payload,
            set_run_at,
            set_delay,
            set_queue,
            set_key,
            set_priority,
            set_max_attempts,
            set_misfire,
            set_misfire_grace,
            set_rate_key,
            set_unique_for,
        ) = _JOB_SPEC_SETTERS
        set_task(self, task)
        set_payload(self, payload)
        set_run_at(self, run_at)
        set_delay(self, delay)
        set_queue(self, queue)
        set_key(self, key)
        set_priority(self, priority)
        set_max_attempts(self, max_attempts)
        set_misfire(self, misfire)
        set_misfire_grace(self, misfire_grace)
        set_rate_key(self, rate_key)
        set_unique_for(self, unique_for)


# What JobSpec.__init__ sets its slots with, in field order.
_JOB_SPEC_SETTERS: tuple[Callable[[JobSpec, Any], None], ...] = tuple(
    JobSpec.__dict__[field.name].__set__ for field in fields(JobSpec)
)


@dataclass(frozen=True, slots=True, init=False)
class Enqueued:
    """What enqueue returns: the job's `id`, and `created=False` when a live job already held
    its key, or (with `unique_for`) a job took it within the period (the id is then that
    job's)."""

    id: int
    created: bool

    def __init__(self, id: int, created: bool) -> None:
        # Through the slots' descriptors, as JobSpec's: a bulk enqueue returns one a job.
        _set_enqueued_id(self, id)
        _set_enqueued_created(self, created)


_set_enqueued_id: Callable[[Enqueued, int], None] = Enqueued.__dict__["id"].__set__
_set_enqueued_created: Callable[[Enqueued, bool], None] = Enqueued.__dict__["created"].__set__


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while jobs are converted and sent. A bulk enqueue
    allocates a few objects a job (the caller's specs, their parameters, the results), none of
    them in a cycle, yet their count alone made the collector run about 285 times inside a
    100,000-job enqueue, 46-57 ms of about 1 s. The collector is process-wide: one already off
    (by the application, or by another thread's enqueue) is left as it is, and it is switched
    back on when the enqueue ends, whatever the outcome."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def all_created(ids: Iterable[int]) -> list[Enqueued]:
    """What a bulk insert that created every job returns, one `Enqueued` an id in order:
    without a call of __init__ each, 0.2 against 0.46 µs a job."""
    new = object.__new__
    results = []
    for job_id in ids:
        result = new(Enqueued)
        _set_enqueued_id(result, job_id)
        _set_enqueued_created(result, True)
        results.append(result)
    return results


class TaskSettings(Protocol):
    """What a registered task decides for its jobs when a job does not say (`chronoq.Task`)."""

    @property
    def queue(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def lease(self) -> float: ...
    @property
    def misfire(self) -> Misfire: ...
    @property
    def payload_shape(self) -> PayloadShape: ...


@dataclass(frozen=True, slots=True)
class EnqueueDefaults:
    """The app's settings for what no task decides: jobs of tasks it does not know (a producer
    without the handlers' code) and the payload limit of every job."""

    queue: str
    lease: float
    payload_limit: int
    # The tasks come from the fleet registry (`chronoq.fleet.records.catalog`), not from handlers
    # in this process: a task no live or recent process knows is refused, even when none is
    # known, unless the job names its queue (a task whose workers are not deployed yet).
    fleet: bool = False


# Not frozen, like the store's insert parameters: one is built per job on the bulk-enqueue
# path, and a frozen dataclass costs three times as much to build. Nothing mutates it.
@dataclass(slots=True)
class PreparedJob:
    """A checked, complete job: everything the store's insert needs, nothing left to check.
    `payload_json` is the encoded payload; `misfire_grace` (seconds) is set for "skip" only;
    `max_attempts` None lets the claiming worker apply its task's setting."""

    queue: str
    task: str
    payload_json: str
    run_at: datetime | None
    delay_seconds: float
    priority: int
    max_attempts: int | None
    lease_seconds: float
    key: str | None
    misfire: str
    misfire_grace: float | None
    rate_key: str | None
    unique_for: float | None = None


J = TypeVar("J", covariant=True)


class JobBuilder(Protocol[J]):
    """What `prepare` builds its result with: `PreparedJob`, or a store's own insert parameters
    (the app passes those, so a job takes one object on its way to the store, not two)."""

    def __call__(
        self,
        *,
        queue: str,
        task: str,
        payload_json: str,
        run_at: datetime | None,
        delay_seconds: float,
        priority: int,
        max_attempts: int | None,
        lease_seconds: float,
        key: str | None,
        misfire: str,
        misfire_grace: float | None,
        rate_key: str | None,
        unique_for: float | None,
    ) -> J: ...


@overload
def prepare(
    spec: JobSpec, tasks: Mapping[str, TaskSettings], defaults: EnqueueDefaults
) -> PreparedJob: ...


@overload
def prepare(
    spec: JobSpec,
    tasks: Mapping[str, TaskSettings],
    defaults: EnqueueDefaults,
    build: JobBuilder[J],
) -> J: ...


def prepare(
    spec: JobSpec,
    tasks: Mapping[str, TaskSettings],
    defaults: EnqueueDefaults,
    build: JobBuilder[Any] = PreparedJob,
) -> Any:
    """Check `spec` against the registered `tasks` (none: any task name is accepted) and fill
    in what it leaves out; raises before anything is stored, naming the field at fault.
    Returns a `PreparedJob`, or what `build` makes of the same fields."""
    task = _task(spec, tasks, defaults)
    queue = _queue(spec.queue, task, tasks, defaults)
    payload_json = encode_payload(spec.task, spec.payload, defaults.payload_limit)
    if task is not None:
        task.payload_shape.check(spec.payload or {})
    lease = task.lease if task is not None else defaults.lease
    return _build(spec, task, queue, payload_json, lease, build)


def check_options(spec: JobSpec, task: TaskSettings) -> None:
    """Check the options of a job of `task` before its payload is known (`Task.configure`),
    with the checks and errors of `prepare`. Two checks wait for `prepare`: the payload's, and
    whether a task of the app uses the queue, which depends on what is registered by then."""
    if spec.queue is not None:
        check_name("queue", spec.queue)
    _build(spec, task, spec.queue or task.queue, "{}", task.lease, PreparedJob)


def _build(
    spec: JobSpec,
    task: TaskSettings | None,
    queue: str,
    payload_json: str,
    lease: float,
    build: JobBuilder[J],
) -> J:
    """The job's options, checked and completed from its task, built with its payload."""
    if spec.run_at is not None and spec.delay is not None:
        raise ConfigError("give either `run_at` or `delay`, not both")
    misfire = _misfire(spec, task)
    key = None if spec.key is None else check_key(spec.key)
    # An option left out skips its check's call: this runs once per job of a bulk enqueue.
    return build(
        queue=queue,
        task=spec.task,
        payload_json=payload_json,
        run_at=check_instant("run_at", spec.run_at) if spec.run_at is not None else None,
        delay_seconds=0.0 if spec.delay is None else delay_seconds(spec.delay),
        priority=_priority(spec.priority, task),
        max_attempts=_max_attempts(spec.max_attempts, task),
        lease_seconds=lease,
        key=key,
        misfire=_POLICY_TEXT[misfire.policy],
        misfire_grace=(
            misfire.grace.total_seconds() if misfire.policy is MisfirePolicy.SKIP else None
        ),
        rate_key=None if spec.rate_key is None else check_key(spec.rate_key, field="rate_key"),
        unique_for=None if spec.unique_for is None else unique_for_seconds(spec.unique_for, key),
    )


def _task(
    spec: JobSpec, tasks: Mapping[str, TaskSettings], defaults: EnqueueDefaults
) -> TaskSettings | None:
    """The registered task of that name; None when no task is registered (any name goes), or
    for a task the fleet does not know yet whose job names its queue."""
    name = spec.task
    # A registered task's name was checked when it was registered.
    task = tasks.get(name) if isinstance(name, str) else None
    if task is None:
        check_name("task", name)
        if defaults.fleet and spec.queue is None:
            raise UnknownTask(
                f"unknown task {name!r}: no live or recent worker knows it"
                f"{did_you_mean(name, tasks)} (give the job's queue to enqueue it before its "
                "workers are deployed)"
            )
        if tasks and not defaults.fleet:
            raise UnknownTask(f"unknown task {name!r}{did_you_mean(name, tasks)}")
    return task


def _queue(
    queue: str | None,
    task: TaskSettings | None,
    tasks: Mapping[str, TaskSettings],
    defaults: EnqueueDefaults,
) -> str:
    """The job's own queue, which some task of the app must use, else its task's."""
    if queue is None:
        return task.queue if task is not None else defaults.queue
    check_name("queue", queue)
    if task is not None and queue == task.queue:
        return queue  # the common case, answered without looking at every task
    if defaults.fleet:
        # The registry knows what has been deployed, not what is about to be: a queue given
        # explicitly is taken as the producer's word.
        return queue
    used = list(dict.fromkeys(other.queue for other in tasks.values()))
    if used and queue not in used:
        raise UnknownQueue(
            f"unknown queue {queue!r}: no task of this app uses it{did_you_mean(queue, used)}"
        )
    return queue


def _misfire(spec: JobSpec, task: TaskSettings | None) -> Misfire:
    """The job's own misfire rule, else its task's, else "run_late"."""
    if spec.misfire is None and spec.misfire_grace is None:
        return task.misfire if task is not None else RUN_LATE
    policy = spec.misfire or (task.misfire.policy if task is not None else "skip")
    return job_misfire(str(policy), spec.misfire_grace)


def _priority(priority: int | None, task: TaskSettings | None) -> int:
    """The job's own priority, else its task's, else 0."""
    if priority is not None:
        return check_int("priority", priority, *PRIORITY_RANGE)
    return task.priority if task is not None else 0


def _max_attempts(max_attempts: int | None, task: TaskSettings | None) -> int | None:
    """The job's own number, else its task's; None lets the claiming worker decide."""
    if max_attempts is not None:
        return check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
    return task.max_attempts if task is not None else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest choice, else the list of choices, else ""."""
    options: Sequence[str] = sorted(choices)
    close = difflib.get_close_matches(name, options, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; known: {', '.join(options)}" if options else ""
