"""`chronoq.core.enqueue.prepare` alone: a job spec and task settings in, insert fields out."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import chronoq
from chronoq.core.enqueue import (
    Enqueued,
    EnqueueDefaults,
    JobSpec,
    PreparedJob,
    all_created,
    collector_paused,
    prepare,
)
from chronoq.core.misfire import RUN_LATE, Misfire, MisfirePolicy
from chronoq.core.validate import PayloadShape
from chronoq.errors import (
    ConfigError,
    InvalidDuration,
    InvalidPayload,
    InvalidSchedule,
    NaiveDatetime,
    PayloadTooLarge,
    UnknownQueue,
    UnknownTask,
)
from chronoq.storage.base import JobInsertParams

DEFAULTS = EnqueueDefaults(queue="default", lease=60.0, payload_limit=1000)
LATER = datetime(2030, 1, 31, 9, tzinfo=UTC)


SEND_SHAPE = PayloadShape.of("send", inspect.signature(lambda to: None))


@dataclasses.dataclass(frozen=True)
class Settings:
    """Task settings as a registered task holds them."""

    queue: str
    priority: int = 0
    max_attempts: int = 20
    lease: float = 30.0
    misfire: Misfire = RUN_LATE
    payload_shape: PayloadShape = SEND_SHAPE


TASKS = {
    "send": Settings(queue="emails", priority=5, max_attempts=8, lease=12.5),
    "report": Settings(
        queue="reports",
        misfire=Misfire(MisfirePolicy.SKIP, timedelta(seconds=90)),
        payload_shape=PayloadShape.of("report", inspect.signature(lambda: None)),
    ),
}


def test_a_job_of_a_known_task_takes_the_task_settings() -> None:
    job = prepare(JobSpec("send", {"to": "a@example.com"}), TASKS, DEFAULTS)
    assert job == PreparedJob(
        queue="emails",
        task="send",
        payload_json='{"to":"a@example.com"}',
        run_at=None,
        delay_seconds=0.0,
        priority=5,
        max_attempts=8,
        lease_seconds=12.5,
        key=None,
        misfire="run_late",
        misfire_grace=None,
        rate_key=None,
    )


def test_the_job_own_options_win_over_the_task() -> None:
    spec = JobSpec(
        "send",
        {"to": "a"},
        run_at=LATER,
        queue="reports",
        key="k",
        priority=-3,
        max_attempts=2,
        misfire="skip",
        misfire_grace="5m",
        rate_key="customer:1",
    )
    job = prepare(spec, TASKS, DEFAULTS)
    assert (job.queue, job.run_at, job.key, job.priority, job.max_attempts) == (
        "reports",
        LATER,
        "k",
        -3,
        2,
    )
    assert (job.misfire, job.misfire_grace, job.rate_key) == ("skip", 300.0, "customer:1")


def test_a_grace_alone_keeps_the_task_policy_and_means_skip_for_an_unknown_task() -> None:
    assert prepare(JobSpec("report"), TASKS, DEFAULTS).misfire_grace == 90.0
    job = prepare(JobSpec("report", misfire_grace=10), TASKS, DEFAULTS)
    assert (job.misfire, job.misfire_grace) == ("skip", 10.0)
    job = prepare(JobSpec("send", {"to": "a"}, misfire_grace=10), TASKS, DEFAULTS)
    assert (job.misfire, job.misfire_grace) == ("run_late", None)
    job = prepare(JobSpec("elsewhere", misfire_grace=10), {}, DEFAULTS)
    assert (job.misfire, job.misfire_grace) == ("skip", 10.0)


def test_without_registered_tasks_any_task_takes_the_defaults() -> None:
    job = prepare(JobSpec("elsewhere", {"any": [1]}, delay="2m"), {}, DEFAULTS)
    assert (job.queue, job.lease_seconds, job.priority, job.max_attempts) == (
        "default",
        60.0,
        0,
        None,
    )
    assert (job.payload_json, job.delay_seconds) == ('{"any":[1]}', 120.0)
    assert prepare(JobSpec("elsewhere", queue="any-queue"), {}, DEFAULTS).queue == "any-queue"


def test_the_builder_gets_the_same_fields() -> None:
    spec = JobSpec("send", {"to": "a"}, key="k")
    params = prepare(spec, TASKS, DEFAULTS, JobInsertParams)
    assert isinstance(params, JobInsertParams)
    prepared = dataclasses.asdict(prepare(spec, TASKS, DEFAULTS))
    assert {name: getattr(params, name) for name in prepared} == prepared


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        pytest.param(JobSpec("sned", {"to": "a"}), UnknownTask, "did you mean 'send'", id="task"),
        pytest.param(JobSpec(""), ConfigError, "task name must be", id="task-empty"),
        pytest.param(
            JobSpec("send", {"to": "a"}, queue="emials"),
            UnknownQueue,
            "no task of this app uses it; did you mean 'emails'",
            id="queue",
        ),
        pytest.param(JobSpec("send", {"to": "a"}, queue="a\nb"), ConfigError, "control", id="q"),
        pytest.param(JobSpec("send", {"too": "a"}), InvalidPayload, "unexpected 'too'", id="fit"),
        pytest.param(JobSpec("send", {"to": "x" * 2000}), PayloadTooLarge, "limit is 1000"),
        pytest.param(
            JobSpec("send", {"to": "a"}, run_at=LATER, delay=5),
            ConfigError,
            "either `run_at` or `delay`",
            id="run_at-and-delay",
        ),
        pytest.param(
            JobSpec("send", {"to": "a"}, run_at=datetime(2030, 1, 1)),
            NaiveDatetime,
            "^run_at=2030-01-01T00:00:00 has no time zone",
            id="naive",
        ),
        pytest.param(JobSpec("send", {"to": "a"}, delay=-1), InvalidDuration, "negative"),
        pytest.param(JobSpec("send", {"to": "a"}, priority=2**31), ConfigError, "^priority"),
        pytest.param(JobSpec("send", {"to": "a"}, max_attempts=0), ConfigError, "^max_attempts"),
        pytest.param(JobSpec("send", {"to": "a"}, key=""), ConfigError, "^key must be"),
        pytest.param(JobSpec("send", {"to": "a"}, rate_key="\x00"), ConfigError, "^rate_key"),
        pytest.param(
            JobSpec("send", {"to": "a"}, misfire="coalesce"),
            InvalidSchedule,
            "applies to schedules only",
            id="misfire",
        ),
        pytest.param(
            JobSpec("send", {"to": "a"}, misfire_grace="-5s"),
            InvalidSchedule,
            "misfire grace must not be negative",
            id="misfire-grace",
        ),
    ],
)
def test_refusals_name_the_field(spec: JobSpec, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        prepare(spec, TASKS, DEFAULTS)


def test_job_spec_takes_its_options_by_keyword_only() -> None:
    with pytest.raises(TypeError, match="positional"):
        JobSpec("send", {"to": "a"}, LATER)  # type: ignore[misc]
    assert JobSpec("send", {"to": "a"}, run_at=LATER).run_at == LATER


# -- the renamed option `at`, through the app -------------------------------------------------


@pytest.fixture
def greet() -> Any:
    app = chronoq.App("sqlite:///never-opened.db")  # every refusal comes before the store

    @app.task
    def greet(name: str) -> None: ...

    return greet


def test_defer_refuses_the_old_name_at_pointing_to_configure(greet: Any) -> None:
    with pytest.raises(InvalidPayload, match=r"`at`.*greet\.configure\(run_at=\.\.\.\)"):
        greet.defer(name="x", at=LATER)


def test_configure_refuses_the_old_name_at_with_the_new_one(greet: Any) -> None:
    with pytest.raises(ConfigError, match=r"^the option `at` is now called `run_at`$"):
        greet.configure(at=LATER, run_at=LATER)


def test_enqueue_async_refuses_at_and_run_at_together(greet: Any) -> None:
    with pytest.raises(ConfigError, match="`at` and `run_at` are both given"):
        asyncio.run(greet.app.enqueue_async("greet", {"name": "x"}, at=LATER, run_at=LATER))


def test_a_handler_parameter_named_at_is_payload() -> None:
    app = chronoq.App("sqlite:///never-opened.db")
    task = app.task(lambda at: None)
    assert task.payload_shape.required == {"at"}


# -- JobSpec's own __init__ ------------------------------------------------------------------


def test_job_spec_takes_its_fields_as_the_dataclass_would() -> None:
    # JobSpec writes its __init__ by hand (see there): it must take exactly the fields, the
    # first two by position, the rest by keyword only, each defaulting to its field's default.
    params = list(inspect.signature(JobSpec.__init__).parameters.values())[1:]
    specs = dataclasses.fields(JobSpec)
    assert [p.name for p in params] == [f.name for f in specs]
    assert [p.default for p in params[1:]] == [f.default for f in specs[1:]]
    assert [p.kind for p in params] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2 + [
        inspect.Parameter.KEYWORD_ONLY
    ] * (len(specs) - 2)
    values = {f.name: f"value of {f.name}" for f in specs}
    spec = JobSpec(**values)
    assert dataclasses.asdict(spec) == values
    assert dataclasses.replace(spec, queue="other") == JobSpec(**(values | {"queue": "other"}))


def test_job_spec_stays_frozen() -> None:
    spec = JobSpec("send", {"to": "a@example.com"}, queue="emails")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.queue = "other"  # type: ignore[misc]
    assert spec == JobSpec("send", {"to": "a@example.com"}, queue="emails")
    assert repr(spec).startswith("JobSpec(task='send', payload={'to': 'a@example.com'}")
    with pytest.raises(TypeError):
        JobSpec("send", None, "emails")  # type: ignore[misc]


# -- Enqueued, made one a job -----------------------------------------------------------------


def test_enqueued_takes_its_fields_as_the_dataclass_would() -> None:
    params = list(inspect.signature(Enqueued.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in dataclasses.fields(Enqueued)]
    assert all(p.default is inspect.Parameter.empty for p in params)
    result = Enqueued(7, created=False)
    assert (result.id, result.created) == (7, False)
    assert result == Enqueued(id=7, created=False) != Enqueued(7, created=True)
    assert repr(result) == "Enqueued(id=7, created=False)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.id = 8  # type: ignore[misc]


def test_all_created_is_one_created_result_an_id_in_order() -> None:
    results = all_created(iter([5, 3, 9]))
    assert results == [Enqueued(5, created=True), Enqueued(3, created=True), Enqueued(9, True)]
    assert {Enqueued(5, created=True)} == set(results[:1])  # hashable as the dataclass makes it
    assert all_created([]) == []


# -- the collector held off while jobs are converted and sent ----------------------------------


def test_the_collector_is_off_inside_and_back_on_after_whatever_happens() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a refused job")
    assert gc.isenabled()


def test_a_collector_already_off_is_left_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_bulk_enqueue_reads_its_specs_with_the_collector_off(tmp_path: Any) -> None:
    app = chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    seen: list[bool] = []

    def specs() -> Iterator[JobSpec]:
        for number in range(3):
            seen.append(gc.isenabled())
            yield JobSpec("send", {"number": number}, queue="default")

    try:
        results = app.enqueue_many(specs())
    finally:
        app.close()
    assert seen == [False, False, False]
    assert gc.isenabled()
    assert [result.created for result in results] == [True, True, True]
