"""Hostile names (tasks, queues, schedules, keys, key patterns) through the Python API, on both
stores: a legal name goes everywhere a name goes and comes back byte for byte; any other is
refused, wherever it is given, with a ConfigError naming the field."""

from __future__ import annotations

import pytest

from chronoq import ConfigError, JobStatus
from chronoq.storage.base import JobClaimParams, JobListParams, QueueSettings
from chronoq.testing import fire_schedules
from tests.hostile.inputs import BAD_NAMES, NAMES
from tests.hostile.support import HTML, Arena, refused


def _handler() -> None: ...


@pytest.mark.parametrize("name", NAMES)
def test_a_legal_name_goes_everywhere_and_comes_back_exactly(arena: Arena, name: str) -> None:
    app, store = arena.app, arena.app.store
    # A job: task, queue, key and rate key, and the name as a payload key.
    first = app.enqueue(name, {name: name}, queue=name, key=name, rate_key=name)
    again = app.enqueue(name, {"other": 1}, queue=name, key=name)
    assert first.created and (again.id, again.created) == (first.id, False)
    job = app.get_job(first.id)
    assert job is not None
    assert (job.task, job.queue, job.key, job.rate_key, job.payload) == (
        (name,) * 4 + ({name: name},)
    )
    assert [j.id for j in store.job_list(JobListParams(queue=name, task=name))] == [first.id]
    # A schedule of that name, firing tick jobs of a task of that name on a queue of that name.
    # A schedule name may not hold '/' (it is one segment of the API's /schedules/NAME): such a
    # name is refused, and the schedule takes the name with '-' for '/'.
    schedule_name = name.replace("/", "-")
    if schedule_name != name:
        with pytest.raises(ConfigError, match="contains '/'"):
            app.schedule("every 1s", name, name=name, queue=name)
    app.schedule("every 1s", name, name=schedule_name, queue=name, payload={name: HTML})
    assert fire_schedules(app) >= 1
    schedule = store.schedule_get(schedule_name)
    assert schedule is not None
    assert (schedule.name, schedule.task, schedule.queue) == (schedule_name, name, name)
    assert schedule.payload == {name: HTML}
    ticks = [row for row in arena.new_rows() if row["schedule"] == schedule_name]
    assert ticks and {(row["task"], row["queue"]) for row in ticks} == {(name, name)}
    # The queue: paused, then limited per key with the name as a glob.
    assert store.queue_pause(name, True).paused
    claim = JobClaimParams([name], 100, "hostile:1:1")
    assert store.job_claim_with_wakeup(claim).jobs == []
    app.limit_keys(name, name, rate="1000000/s")
    app.sync_limits()
    assert [limit.pattern for limit in store.queue_get(name).key_limits] == [name]
    assert store.key_limit_remove(name, name)
    assert store.queue_pause(name, False) == QueueSettings(name)
    claimed = store.job_claim_with_wakeup(claim).jobs
    assert first.id in {j.id for j in claimed} and {j.task for j in claimed} == {name}
    # A task of that name: registered, deferred, found again.
    task = app.task(name=name, queue=name)(_handler)
    assert app.get_task(name) is task
    deferred = app.get_job(task.configure(key=f"{name} again").defer().id)
    assert deferred is not None and (deferred.task, deferred.queue) == (name, name)
    assert deferred.status is JobStatus.PENDING
    assert store.schedule_remove(schedule_name)
    arena.assert_seeds_intact()


@pytest.mark.parametrize(("name", "match"), BAD_NAMES)
def test_a_bad_name_is_refused_wherever_it_is_given(arena: Arena, name: object, match: str) -> None:
    app = arena.app
    attempts = {
        "task": lambda: app.enqueue(name, {"a": 1}),
        "queue": lambda: app.enqueue("plain", {"a": 1}, queue=name),
        "schedule": lambda: app.schedule_spec(name=name, cadence="@daily", task="plain"),
        "task ": lambda: app.schedule("@daily", name),
        "queue ": lambda: app.schedule("@daily", "plain", name="s", queue=name),
        "queue  ": lambda: app.limit(name, rate="1/s"),
        "queue   ": lambda: app.limit_keys(name, "*", rate="1/s"),
    }
    if name:  # App.task takes a falsy name or queue as not given (see test_admin_and_setup)
        attempts["task    "] = lambda: app.task(name=name)(_handler)
        attempts["queue    "] = lambda: app.task(name="t", queue=name)(_handler)
    for field, attempt in attempts.items():
        with refused(ConfigError, f"^{field.strip()} name.*{match}"):
            attempt()
    assert (app.tasks, app.schedules, app.limits, app.key_limits) == ({}, {}, {}, {})
    app.sync()
    arena.assert_unharmed()
