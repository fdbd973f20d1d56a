"""`Task.configure`: enqueue options apart from the payload, so any parameter name is allowed."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq.errors import (
    ChronoqError,
    ConfigError,
    InvalidDuration,
    InvalidPayload,
    InvalidSchedule,
    NaiveDatetime,
)
from chronoq.testing import drain, enqueued
from tests.contract.support import caller_connection

LATER = datetime(2030, 1, 31, 9, tzinfo=UTC)
# Every option of `configure`, and `at`, its old name for `run_at`.
OPTION_NAMES = (
    "delay",
    "run_at",
    "at",
    "key",
    "queue",
    "priority",
    "max_attempts",
    "misfire",
    "misfire_grace",
    "rate_key",
    "unique_for",
    "conn",
)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[chronoq.App]:
    with chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}") as application:
        application.migrate()
        yield application


@pytest.fixture
def greet(app: chronoq.App) -> Any:
    @app.task(queue="greetings", priority=1)
    def greet(name: str, times: int = 1) -> None: ...

    return greet


def _only_job(app: chronoq.App) -> chronoq.Job:
    (job,) = enqueued(app)
    return job


# -- the options are checked when configure is called -----------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        pytest.param({"delay": -1}, InvalidDuration, "^delay must not be negative", id="delay"),
        pytest.param({"delay": "soon"}, InvalidDuration, "^delay: invalid duration", id="text"),
        pytest.param({"delay": [1]}, InvalidDuration, "^delay must be", id="delay-type"),
        pytest.param({"run_at": datetime(2030, 1, 1)}, NaiveDatetime, "^run_at=", id="naive"),
        pytest.param({"run_at": "2030-01-01"}, ConfigError, "^run_at must be", id="run-at"),
        pytest.param({"run_at": LATER, "delay": 5}, ConfigError, "`run_at` or `delay`", id="both"),
        pytest.param({"key": ""}, ConfigError, "^key must be a non-empty", id="key"),
        pytest.param({"key": "\x00"}, ConfigError, "^key contains a NUL", id="key-nul"),
        pytest.param({"queue": ""}, ConfigError, "^queue name must be", id="queue"),
        pytest.param({"queue": "a\nb"}, ConfigError, "^queue name .* control", id="queue-ctl"),
        pytest.param({"priority": True}, ConfigError, "^priority must be an int", id="priority"),
        pytest.param({"priority": 2**40}, ConfigError, "^priority must be between", id="big"),
        pytest.param({"max_attempts": 0}, ConfigError, "^max_attempts must be", id="attempts"),
        pytest.param({"misfire": "coalesce"}, InvalidSchedule, "misfire policy", id="misfire"),
        pytest.param({"misfire_grace": -1}, InvalidSchedule, "^misfire grace", id="grace"),
        pytest.param({"rate_key": ""}, ConfigError, "^rate_key must be", id="rate-key"),
        pytest.param({"unique_for": "1h"}, ConfigError, "^unique_for needs a key", id="no-key"),
        pytest.param(
            {"key": "k", "unique_for": 0}, InvalidDuration, "^unique_for must be", id="zero"
        ),
        pytest.param(
            {"key": "k", "unique_for": timedelta(seconds=-1)},
            InvalidDuration,
            "^unique_for must be a positive duration",
            id="negative",
        ),
        pytest.param(
            {"key": "k", "unique_for": "an hour"},
            InvalidDuration,
            "^unique_for: invalid duration 'an hour'",
            id="text",
        ),
        pytest.param(
            {"key": "k", "unique_for": [1]}, InvalidDuration, "^unique_for must be a", id="type"
        ),
        pytest.param(
            {"key": "k", "unique_for": True}, InvalidDuration, "^unique_for must be a", id="bool"
        ),
        pytest.param({"key": "k", "unique_for": math.nan}, InvalidDuration, "positive", id="nan"),
        pytest.param({"key": "k", "unique_for": math.inf}, InvalidDuration, "100 years", id="inf"),
        pytest.param(
            {"key": "k", "unique_for": timedelta.max}, InvalidDuration, "100 years", id="max"
        ),
        pytest.param({"key": "k", "unique_for": 10**400}, InvalidDuration, "100 years", id="huge"),
    ],
)
def test_configure_checks_each_option_at_once_naming_it(
    greet: Any, options: dict[str, Any], error: type[ChronoqError], match: str
) -> None:
    with pytest.raises(error, match=match):
        greet.configure(**options)


def test_an_unknown_option_is_refused_with_a_suggestion(greet: Any) -> None:
    with pytest.raises(ConfigError, match=r"^configure\(\) has no option 'dealy'; did you mean"):
        greet.configure(dealy=5)
    with pytest.raises(ConfigError, match=r"^the option `at` is now called `run_at`$"):
        greet.configure(at=LATER)


def test_a_queue_is_checked_against_the_tasks_when_the_job_is_enqueued(
    app: chronoq.App, greet: Any
) -> None:
    # A task of the queue may be registered after the configure call, as modules load.
    vip = greet.configure(queue="vip")

    @app.task(queue="vip")
    def other() -> None: ...

    assert _only_job_after(app, vip.defer(name="a")).queue == "vip"
    with pytest.raises(chronoq.UnknownQueue, match="did you mean 'vip'"):
        greet.configure(queue="vpi").defer(name="a")


def test_a_job_unique_for_a_period_is_returned_after_it_ran(app: chronoq.App, greet: Any) -> None:
    daily = greet.configure(key="greet-ann", unique_for="1d")
    first = daily.defer(name="ann")
    drain(app)
    assert app.get_job(first.id).status is chronoq.JobStatus.DONE  # type: ignore[union-attr]
    assert daily.defer(name="ann") == chronoq.Enqueued(first.id, created=False)
    assert app.enqueue("greet", {"name": "ann"}, key="greet-ann", unique_for=60) == (
        chronoq.Enqueued(first.id, created=False)
    )


def _only_job_after(app: chronoq.App, enqueued: chronoq.Enqueued) -> chronoq.Job:
    job = app.get_job(enqueued.id)
    assert job is not None
    return job


# -- what a configured task enqueues -----------------------------------------------------------


def test_the_options_apply_and_the_task_settings_fill_in_the_rest(
    app: chronoq.App, greet: Any
) -> None:
    deferrer = greet.configure(key="k-1", max_attempts=3, run_at=LATER, rate_key="r")
    job = _only_job_after(app, deferrer.defer(name="a"))
    assert (job.key, job.max_attempts, job.run_at, job.rate_key) == ("k-1", 3, LATER, "r")
    assert (job.queue, job.priority, job.payload) == ("greetings", 1, {"name": "a"})


def test_a_deferrer_is_immutable_and_can_be_reused(app: chronoq.App, greet: Any) -> None:
    later = greet.configure(priority=9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        later.conn = object()
    first, second = later.defer(name="a"), later.defer(name="b")
    assert [_only_job_after(app, e).priority for e in (first, second)] == [9, 9]
    assert _only_job_after(app, greet.defer(name="c")).priority == 1  # the task is unchanged


def test_defer_async_applies_the_options(app: chronoq.App, greet: Any) -> None:
    enqueued = asyncio.run(greet.configure(key="async-1").defer_async(name="a"))
    assert _only_job_after(app, enqueued).key == "async-1"


def test_with_conn_the_job_exists_only_if_the_transaction_commits(
    app: chronoq.App, greet: Any
) -> None:
    with caller_connection(app.store) as conn:
        greet.configure(conn=conn).defer(name="rolled back")
        conn.rollback()
    assert enqueued(app) == []


def test_the_repr_names_the_options_but_not_the_connection(greet: Any) -> None:
    deferrer = greet.configure(delay="4h", key="k", conn=object())
    assert repr(deferrer) == "<Deferrer greet delay='4h' key='k' conn=<object>>"
    assert repr(greet.configure()) == "<Deferrer greet>"


# -- every parameter name is the payload's -----------------------------------------------------


def test_a_handler_may_name_its_parameters_like_the_options(app: chronoq.App) -> None:
    seen: list[dict[str, Any]] = []

    @app.task
    def every_name(
        ctx: chronoq.JobContext,
        delay: str,
        run_at: str,
        at: str,
        key: str,
        queue: str,
        priority: str,
        max_attempts: str,
        misfire: str,
        misfire_grace: str,
        rate_key: str,
        unique_for: str,
        conn: str,
    ) -> None:
        arguments = locals()
        seen.append({name: arguments[name] for name in OPTION_NAMES})

    payload = {name: f"{name} value" for name in OPTION_NAMES}
    job = _only_job_after(app, every_name.configure(key="the job's key").defer(**payload))
    assert (job.payload, job.key, job.queue) == (payload, "the job's key", "default")
    assert drain(app).done == 1
    assert seen == [payload]


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_defer_refuses_an_option_the_handler_does_not_name(
    app: chronoq.App, greet: Any, name: str
) -> None:
    fix = "run_at" if name == "at" else name
    with pytest.raises(InvalidPayload, match=rf"greet.configure\({fix}=\.\.\.\)\.defer"):
        greet.defer(name="a", **{name: 5})
    assert enqueued(app) == []


def test_defer_refuses_an_option_a_handler_would_take_only_through_its_kwargs(
    app: chronoq.App,
) -> None:
    @app.task
    def anything(**fields: Any) -> None: ...

    # Before configure, this delayed the job: it must not become a payload field silently.
    with pytest.raises(InvalidPayload, match=r"`delay`, which is an enqueue option"):
        anything.defer(note="x", delay=60)
    assert anything.defer(note="x", other=1).created


# -- positional arguments ----------------------------------------------------------------------


def test_positional_arguments_are_stored_under_their_parameters_names(
    app: chronoq.App, greet: Any
) -> None:
    assert _only_job_after(app, greet.defer("a", 2)).payload == {"name": "a", "times": 2}
    job = _only_job_after(app, greet.configure(key="p").defer("b", times=3))
    assert job.payload == {"name": "b", "times": 3}


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        pytest.param(("a", 1, 2), {}, "too many positional arguments", id="too-many"),
        pytest.param(("a",), {"name": "b"}, "'name' by position and by keyword", id="twice"),
    ],
)
def test_positional_arguments_that_do_not_fit_are_refused(
    greet: Any, args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidPayload, match=match):
        greet.defer(*args, **kwargs)


def test_star_args_cannot_be_filled_by_a_payload(app: chronoq.App) -> None:
    @app.task
    def many(*names: str) -> None: ...

    with pytest.raises(InvalidPayload, match="'names' takes positional arguments only"):
        many.defer("a", "b")
