"""Hostile input to the administration functions of the store (cancel, requeue, purge, look-ups,
pause and removal by name), to task registration (`App.task`) and to DSNs."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chronoq import (
    App,
    ConfigError,
    InvalidDSN,
    InvalidSchedule,
    JobStatus,
    StoreUnavailable,
)
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    JobListParams,
    QueueSettings,
)
from tests.hostile.inputs import INJECTIONS
from tests.hostile.support import (
    HTML,
    SEED_LIMITED,
    SEED_PATTERN,
    SEED_QUEUE,
    SEED_SCHEDULE,
    SQL,
    Arena,
    refused,
)

NO_SUCH_IDS = [0, -1, 2**63 - 1, 2**63, 2**70, -(2**70)]


@pytest.mark.parametrize("job_id", NO_SUCH_IDS)
def test_ids_that_name_no_job_find_nothing(arena: Arena, job_id: int) -> None:
    store = arena.app.store
    assert store.job_get(job_id) is None
    assert arena.app.get_job(job_id) is None
    assert store.job_cancel(job_id) is None
    result = store.dead_requeue(DeadRequeueParams(ids=[job_id]))
    assert (result.requeued, result.key_conflicts) == ([], [])
    arena.assert_unharmed()


@pytest.mark.parametrize("text", INJECTIONS)
def test_filters_and_names_are_values_never_sql(arena: Arena, text: str) -> None:
    store = arena.app.store
    assert store.job_list(JobListParams(queue=text)) == []
    assert store.job_list(JobListParams(task=text)) == []
    assert store.dead_requeue(DeadRequeueParams(queue=text)).requeued == []
    assert store.dead_purge(DeadPurgeParams(queue=text)) == 0
    assert store.schedule_get(text) is None
    assert store.schedule_pause(text, True) is None
    assert store.schedule_remove(text) is False
    assert store.key_limit_remove(SEED_LIMITED, text) is False
    assert store.key_limit_remove(text, SEED_PATTERN) is False
    assert store.queue_get(text) == QueueSettings(text)
    arena.assert_unharmed()


def test_cancelling_a_dead_job_changes_nothing(arena: Arena) -> None:
    job = arena.app.store.job_cancel(arena.dead_id)
    assert job is not None and job.status is JobStatus.DEAD
    arena.assert_unharmed()


def test_requeue_and_purge_of_the_dead_queue_reach_exactly_its_job(arena: Arena) -> None:
    store = arena.app.store
    assert store.dead_requeue(DeadRequeueParams(queue=SEED_QUEUE)).requeued == []
    assert store.dead_requeue(DeadRequeueParams(queue="seed-dead")).requeued == [arena.dead_id]
    job = arena.app.get_job(arena.dead_id)
    assert job is not None and job.status is JobStatus.PENDING


def test_the_seeds_include_a_schedule_a_dead_job_and_limits(arena: Arena) -> None:
    assert SEED_SCHEDULE in arena.before.schedules
    assert SEED_LIMITED in arena.before.queues
    assert [job["status"] for job in arena.before.jobs].count("dead") == 1


# -- task registration ------------------------------------------------------------------------


def _handler() -> None: ...


REGISTRATIONS = [
    pytest.param({"name": "a\x00b"}, ConfigError, "task name.*control", id="name-nul"),
    pytest.param({"name": "a\nb"}, ConfigError, "task name.*control", id="name-newline"),
    pytest.param({"name": "t" * 201}, ConfigError, "task name.*201 characters", id="name-long"),
    pytest.param({"name": "\udcff"}, ConfigError, "task name.*UTF-8", id="name-surrogate"),
    pytest.param({"name": "   "}, ConfigError, "task name.*non-empty", id="name-blank"),
    pytest.param({"queue": "q\x00"}, ConfigError, "queue name.*control", id="queue-nul"),
    pytest.param({"queue": "\t"}, ConfigError, "queue name.*non-empty", id="queue-blank"),
    pytest.param({"max_attempts": -1}, ConfigError, "max_attempts must be", id="attempts-neg"),
    pytest.param({"max_attempts": 1001}, ConfigError, "max_attempts must be", id="attempts-1001"),
    pytest.param({"max_attempts": True}, ConfigError, "integer, got True", id="attempts-bool"),
    pytest.param({"max_attempts": 2.5}, ConfigError, "integer, got 2.5", id="attempts-float"),
    pytest.param({"lease": -1}, ConfigError, "lease must be a positive", id="lease-neg"),
    pytest.param({"lease": math.nan}, ConfigError, "lease must be a positive", id="lease-nan"),
    pytest.param({"lease": math.inf}, ConfigError, "lease is out of range", id="lease-inf"),
    pytest.param({"lease": 1e300}, ConfigError, "lease is out of range", id="lease-1e300"),
    pytest.param({"lease": 10**400}, ConfigError, "lease is out of range", id="lease-10**400"),
    pytest.param({"lease": True}, ConfigError, "lease must be a positive", id="lease-bool"),
    pytest.param({"lease": "60"}, ConfigError, "lease must be a positive", id="lease-text"),
    pytest.param({"priority": 2**31}, ConfigError, "priority must be", id="priority-high"),
    pytest.param({"priority": False}, ConfigError, "integer, got False", id="priority-bool"),
    pytest.param({"misfire": "nope"}, InvalidSchedule, "unknown misfire", id="misfire"),
    pytest.param({"misfire": "catch_up"}, InvalidSchedule, "schedules only|needs", id="catch-up"),
    pytest.param(
        {"misfire": "skip", "misfire_grace": -1}, InvalidSchedule, "negative", id="grace-neg"
    ),
    pytest.param(
        {"misfire": "skip", "misfire_grace": timedelta.max},
        InvalidSchedule,
        "100 years",
        id="grace-max",
    ),
    pytest.param({"timeout": 0}, ConfigError, "timeout must be a positive", id="timeout-0"),
    pytest.param({"timeout": math.nan}, ConfigError, "timeout must be", id="timeout-nan"),
    pytest.param({"timeout": -5}, ConfigError, "timeout must be", id="timeout-neg"),
    pytest.param({"name": ""}, ConfigError, "task name", id="name-empty"),
    pytest.param({"queue": ""}, ConfigError, "queue name", id="queue-empty"),
    pytest.param({"max_attempts": 0}, ConfigError, "max_attempts", id="attempts-0"),
    pytest.param({"lease": 0}, ConfigError, "lease", id="lease-0"),
    pytest.param({"backoff": "fast"}, ConfigError, "backoff must be", id="backoff"),
]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    REGISTRATIONS,
)
def test_bad_task_options_are_refused(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    app = App("sqlite:///never-opened.db")
    with refused(error, match):  # type: ignore[arg-type]
        app.task(**options)(_handler)
    assert app.tasks == {}


def test_a_task_registered_twice_is_refused() -> None:
    app = App("sqlite:///never-opened.db")
    app.task(name=SQL)(_handler)
    with refused(ConfigError, "registered twice"):
        app.task(name=SQL)(_handler)


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(lambda delay: None, id="delay"),
        pytest.param(lambda key, conn: None, id="key-conn"),
        pytest.param(lambda ctx, at, run_at, queue: None, id="ctx-at-run-at-queue"),
    ],
)
def test_handlers_may_name_parameters_like_the_enqueue_options(
    handler: Callable[..., None],
) -> None:
    app = App("sqlite:///never-opened.db")
    task = app.task(name=HTML)(handler)
    assert app.get_task(HTML) is task


# -- DSNs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "match"),
    [
        pytest.param("   ", "empty", id="blank"),
        pytest.param("sqlite:///a\x00b.db", "NUL", id="sqlite-nul"),
        pytest.param("postgresql://u:secret@h\x00/db", "NUL", id="pg-nul"),
        pytest.param("postgresql://u:secret\udcff@h/db", "not UTF-8", id="pg-surrogate"),
        pytest.param("postgresql://u:secret@h:99999/db", "Port out of range", id="pg-port"),
        pytest.param("postgresql://u:secret@h:port/db", "malformed", id="pg-port-text"),
        pytest.param("mysql://u:secret@h/db", "must start with", id="scheme"),
        pytest.param("host=h password=secret dbname=d", "must start with", id="keyword-form"),
        pytest.param("sqlite://relative.db", "invalid SQLite DSN", id="sqlite-two-slashes"),
        pytest.param("sqlite:///:memory:", "name a file", id="sqlite-memory"),
    ],
)
def test_bad_dsns_are_refused_without_the_password(dsn: str, match: str) -> None:
    with refused(InvalidDSN, match) as caught:
        App(dsn).store  # noqa: B018 - opening the store is what is tested
    assert "secret" not in str(caught.value)


def test_a_sqlite_file_in_a_folder_that_does_not_exist_is_one_clear_error(tmp_path: Path) -> None:
    with refused(StoreUnavailable, "does not exist"):
        App(f"sqlite:///{tmp_path}/{SQL}/x.db").store  # noqa: B018
