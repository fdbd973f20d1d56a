"""The admin API (`app.admin`) on each store: every operation, and its not-found, "did you
mean" and conflict errors, which every front end (HTTP, dashboard, CLI) only translates."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest

import chronoq
from chronoq import (
    ConfigError,
    Conflict,
    JobFinished,
    JobNotFound,
    KeyLimitNotFound,
    NotFound,
    QueueNotEmpty,
    QueueNotFound,
    ScheduleNotFound,
)
from chronoq.core.jobs import JobStatus, Outcome
from chronoq.core.schedules import ScheduleSpec
from chronoq.observability.events import Administered, Subscription
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    JobClaimParams,
    JobFinishParams,
    JobListParams,
)


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    app = chronoq.App(dsn)

    @app.task(queue="emails")
    def send_email(to: str = "") -> None:
        pass

    @app.task(queue="reports")
    def report() -> None:
        pass

    app.add_schedule(
        ScheduleSpec.build(name="nightly", cadence="0 3 * * *", task="report", queue="reports")
    )
    yield app
    app.close()


def claim(app: chronoq.App, queue: str = "emails") -> chronoq.Job:
    [job] = app.store.job_claim_with_wakeup(JobClaimParams([queue], 1, "w")).jobs
    return job


def end(app: chronoq.App, job: chronoq.Job, outcome: Outcome) -> None:
    error = {"error": "E", "message": "m"}
    assert app.store.job_finish_many(
        [JobFinishParams(job.id, job.lease_token, outcome, error=error)]
    )


def dead(app: chronoq.App, queue: str = "emails", key: str | None = None) -> int:
    task = "send_email" if queue == "emails" else "report"
    job_id = app.enqueue(task, key=key).id
    end(app, claim(app, queue), Outcome.DEAD)
    return job_id


def status(app: chronoq.App, job_id: int) -> JobStatus | None:
    job = app.get_job(job_id)
    return None if job is None else job.status


def test_the_app_owns_one_admin_that_opens_nothing(dsn: str) -> None:
    app = chronoq.App(dsn)
    assert app.admin is app.admin
    assert app._store is None  # the first operation opens the store, as the app's own
    app.close()


def test_the_error_classes_form_two_families() -> None:
    for error in (JobNotFound, ScheduleNotFound, QueueNotFound, KeyLimitNotFound):
        assert issubclass(error, NotFound)
    for error in (JobFinished, QueueNotEmpty):
        assert issubclass(error, Conflict)


# -- jobs -----------------------------------------------------------------------------------


def test_get_and_list_jobs(app: chronoq.App) -> None:
    first = app.enqueue("send_email", {"to": "a"}, key="k1").id
    second = app.enqueue("report").id
    assert app.admin.get_job(first).key == "k1"
    assert [j.id for j in app.admin.list_jobs(JobListParams())] == [second, first]
    assert [j.id for j in app.admin.list_jobs(JobListParams(queue="emails"))] == [first]
    assert [j.id for j in app.admin.list_jobs(JobListParams(task="report"))] == [second]
    with pytest.raises(JobNotFound, match=r"^no job with id 424242$"):
        app.admin.get_job(424242)


@pytest.mark.parametrize(
    "search",
    [JobListParams(queue=""), JobListParams(task="a\nb"), JobListParams(key="")],
    ids=["empty-queue", "task-with-newline", "empty-key"],
)
def test_a_malformed_filter_is_refused_before_the_store_sees_it(
    app: chronoq.App, search: JobListParams
) -> None:
    with pytest.raises(ConfigError):
        app.admin.list_jobs(search)


def test_cancel_a_pending_and_a_running_job(app: chronoq.App) -> None:
    pending = app.enqueue("report").id
    running = app.enqueue("send_email").id
    claim(app)
    assert app.admin.cancel_job(pending).status is JobStatus.CANCELLED
    assert app.admin.cancel_job(running).status is JobStatus.CANCELLED
    assert (status(app, pending), status(app, running)) == (JobStatus.CANCELLED,) * 2


@pytest.mark.parametrize("outcome", [Outcome.DONE, Outcome.DEAD, Outcome.CANCELLED])
def test_cancelling_a_job_that_has_ended_is_a_conflict(app: chronoq.App, outcome: Outcome) -> None:
    job_id = app.enqueue("send_email").id
    end(app, claim(app), outcome)
    ended = status(app, job_id)
    with pytest.raises(JobFinished) as raised:
        app.admin.cancel_job(job_id)
    assert str(raised.value) == (
        f"job {job_id} is {ended}; only pending or running jobs can be cancelled"
    )
    assert raised.value.job.id == job_id and raised.value.job.status is ended
    assert status(app, job_id) is ended


def test_cancelling_twice_is_a_conflict_the_second_time(app: chronoq.App) -> None:
    job_id = app.enqueue("report").id
    app.admin.cancel_job(job_id)
    with pytest.raises(JobFinished, match="is cancelled"):
        app.admin.cancel_job(job_id)


def test_cancelling_a_missing_job(app: chronoq.App) -> None:
    with pytest.raises(JobNotFound, match=r"^no job with id 424242$"):
        app.admin.cancel_job(424242)


# -- dead letters ---------------------------------------------------------------------------


def test_list_requeue_and_purge_dead_jobs(app: chronoq.App) -> None:
    emails = [dead(app) for _ in range(2)]
    reports = dead(app, "reports")
    alive = app.enqueue("send_email").id
    listed = app.admin.list_dead(JobListParams(statuses=(JobStatus.PENDING,)))
    assert [j.id for j in listed] == [reports, *emails[::-1]]
    assert [j.id for j in app.admin.list_dead(JobListParams(queue="reports"))] == [reports]

    result = app.admin.requeue_dead(DeadRequeueParams(ids=[emails[0], alive, 424242]))
    assert (result.requeued, result.not_dead, result.not_found) == ([emails[0]], [alive], [424242])
    by_queue = app.admin.requeue_dead(DeadRequeueParams(ids=None, queue="reports"))
    assert by_queue.requeued == [reports]
    assert status(app, emails[1]) is JobStatus.DEAD

    assert app.admin.purge_dead(DeadPurgeParams(older_than=timedelta(days=7))) == 0
    assert app.admin.purge_dead(DeadPurgeParams(ids=[emails[1]])) == 1
    assert status(app, emails[1]) is None


def test_requeue_keeps_dead_a_job_whose_key_a_live_job_holds(app: chronoq.App) -> None:
    job_id = dead(app, key="k")
    app.enqueue("send_email", key="k")
    result = app.admin.requeue_dead(DeadRequeueParams(ids=[job_id]))
    assert (result.requeued, result.key_conflicts) == ([], [job_id])


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        (lambda a: a.requeue_dead(DeadRequeueParams(queue="")), "queue name must be a non-empty"),
        (lambda a: a.requeue_dead(DeadRequeueParams(task="a\x00")), "control characters"),
        (lambda a: a.purge_dead(DeadPurgeParams(queue=" ")), "queue name must be a non-empty"),
        (lambda a: a.purge_dead(DeadPurgeParams(older_than=timedelta(-1))), "not be negative"),
    ],
    ids=["requeue-empty-queue", "requeue-bad-task", "purge-blank-queue", "purge-negative-age"],
)
def test_a_malformed_dead_selection_touches_nothing(
    app: chronoq.App, operation: object, message: str
) -> None:
    job_id = dead(app)
    with pytest.raises(ConfigError, match=message):
        operation(app.admin)  # type: ignore[operator]
    assert status(app, job_id) is JobStatus.DEAD


# -- schedules ------------------------------------------------------------------------------


def test_get_pause_resume_and_remove_a_schedule(app: chronoq.App) -> None:
    assert [s.name for s in app.admin.list_schedules()] == ["nightly"]
    assert app.admin.get_schedule("nightly").task == "report"
    assert app.admin.pause_schedule("nightly").paused is True
    assert app.admin.resume_schedule("nightly").paused is False
    app.admin.remove_schedule("nightly")
    assert app.admin.list_schedules() == []


def test_trigger_a_schedule_enqueues_its_job_and_leaves_its_cursor(app: chronoq.App) -> None:
    before = app.admin.get_schedule("nightly")
    enqueued = app.admin.trigger_schedule("nightly")
    job = app.admin.get_job(enqueued.id)
    assert (enqueued.created, job.task, job.queue) == (True, "report", "reports")
    after = app.admin.get_schedule("nightly")
    assert (after.tick_cursor, after.fired) == (before.tick_cursor, before.fired)


@pytest.mark.parametrize(
    "operation",
    ["get_schedule", "pause_schedule", "resume_schedule", "remove_schedule", "trigger_schedule"],
)
def test_a_missing_schedule_suggests_the_closest_name(app: chronoq.App, operation: str) -> None:
    with pytest.raises(ScheduleNotFound) as raised:
        getattr(app.admin, operation)("nightyl")
    assert str(raised.value) == "no schedule named 'nightyl'; did you mean 'nightly'?"
    assert raised.value.suggestion == "; did you mean 'nightly'?"
    assert [s.paused for s in app.admin.list_schedules()] == [False]


def test_a_schedule_name_far_from_any_lists_the_known_ones(app: chronoq.App) -> None:
    with pytest.raises(ScheduleNotFound, match=r"^no schedule named 'zzz'; known: nightly$"):
        app.admin.pause_schedule("zzz")
    app.admin.remove_schedule("nightly")
    with pytest.raises(ScheduleNotFound, match=r"^no schedule named 'zzz'$"):
        app.admin.pause_schedule("zzz")


@pytest.mark.parametrize("name", ["", "a\x00b", "n" * 201])
def test_a_malformed_schedule_name_is_refused(app: chronoq.App, name: str) -> None:
    for operation in (app.admin.get_schedule, app.admin.pause_schedule, app.admin.remove_schedule):
        with pytest.raises(ConfigError, match="schedule name"):
            operation(name)


# -- queues ---------------------------------------------------------------------------------


def test_known_queues_are_declared_or_stored(app: chronoq.App) -> None:
    app.limit("bulk", concurrency=2)
    assert app.admin.known_queues() == {"emails", "reports", "bulk"}
    app.admin.pause_queue("extra", create=True)
    assert "extra" in app.admin.known_queues()


def test_pause_and_resume_a_queue(app: chronoq.App) -> None:
    assert app.admin.pause_queue("emails").paused is True
    app.enqueue("send_email")
    [state] = app.admin.list_queues()
    assert (state.name, state.settings.paused, state.counts.pending) == ("emails", True, 1)
    assert app.admin.resume_queue("emails").paused is False
    assert app.admin.get_queue("emails").settings.paused is False
    assert [q.name for q in app.admin.list_queue_settings()] == ["emails"]


@pytest.mark.parametrize(
    "operation",
    [
        lambda a: a.pause_queue("emials"),
        lambda a: a.resume_queue("emials"),
        lambda a: a.limit_queue("emials", rate="5/s"),
        lambda a: a.limit_key("emials", "c:*", rate="1/s"),
        lambda a: a.remove_queue("emials"),
    ],
    ids=["pause", "resume", "limit", "limit-key", "remove"],
)
def test_an_unknown_queue_suggests_the_closest_and_creates_nothing(
    app: chronoq.App, operation: object
) -> None:
    with pytest.raises(QueueNotFound) as raised:
        operation(app.admin)  # type: ignore[operator]
    assert str(raised.value) == "unknown queue 'emials'; did you mean 'emails'?"
    assert raised.value.suggestion == "; did you mean 'emails'?"
    assert app.store.queue_names() == []


def test_create_makes_a_queue_on_purpose(app: chronoq.App) -> None:
    assert app.admin.pause_queue("bulk", create=True).paused is True
    limited = app.admin.limit_queue("fresh", rate="5/s", concurrency=3, create=True)
    assert (limited.rate, limited.concurrency) == (5.0, 3)
    keyed = app.admin.limit_key("keyed", "c:*", rate="1/s", create=True)
    assert [k.pattern for k in keyed.key_limits] == ["c:*"]


def test_limit_and_unlimit_a_queue_and_its_keys(app: chronoq.App) -> None:
    assert app.admin.limit_queue("emails", rate="10/s", concurrency=2).concurrency == 2
    assert app.admin.limit_queue("emails").limited is False
    keyed = app.admin.limit_key("emails", "customer:*", rate="1/s")
    assert [k.pattern for k in keyed.key_limits] == ["customer:*"]
    assert app.admin.unlimit_key("emails", "customer:*").key_limits == ()


def test_removing_a_key_limit_that_is_not_there_suggests_the_closest(app: chronoq.App) -> None:
    app.admin.limit_key("emails", "customer:*", rate="1/s")
    with pytest.raises(KeyLimitNotFound) as raised:
        app.admin.unlimit_key("emails", "custmer:*")
    assert str(raised.value) == (
        "queue 'emails' has no key limit 'custmer:*'; did you mean 'customer:*'?"
    )
    with pytest.raises(KeyLimitNotFound, match=r"^queue 'nobody' has no key limit 'x'$"):
        app.admin.unlimit_key("nobody", "x")


def test_remove_an_idle_queue_and_refuse_a_busy_one(app: chronoq.App) -> None:
    app.admin.pause_queue("bulk", create=True)
    removal = app.admin.remove_queue("bulk")
    assert (removal.name, removal.removed) == ("bulk", True)
    app.enqueue("send_email")
    with pytest.raises(QueueNotEmpty, match="1 pending and 0 running"):
        app.admin.remove_queue("emails")


@pytest.mark.parametrize("name", ["", "a\x01b"])
def test_a_malformed_queue_name_is_refused_even_with_create(app: chronoq.App, name: str) -> None:
    with pytest.raises(ConfigError, match="queue name"):
        app.admin.pause_queue(name, create=True)
    assert app.store.queue_names() == []


# -- deprecated names -----------------------------------------------------------------------


def test_app_trigger_schedule_still_works_with_a_warning(app: chronoq.App) -> None:
    with pytest.warns(DeprecationWarning, match=r"app\.admin\.trigger_schedule"):
        enqueued = app.trigger_schedule("nightly")
    assert app.admin.get_job(enqueued.id).task == "report"


def test_queues_deprecated_helpers_still_answer(app: chronoq.App) -> None:
    from chronoq import queues

    with pytest.warns(DeprecationWarning, match="app.admin.known_queues"):
        assert queues.known_queues(app) == {"emails", "reports"}
    with pytest.warns(DeprecationWarning, match="queue_to_change"), pytest.raises(QueueNotFound):
        queues.queue_to_change(app, "emials")
    with pytest.warns(DeprecationWarning, match="remove_queue"), pytest.raises(QueueNotFound):
        queues.remove_queue(app, "emials")


# -- figures --------------------------------------------------------------------------------


def test_stats_and_processes(app: chronoq.App) -> None:
    app.enqueue("send_email")
    dead(app, "reports")
    counts = {(s.queue, str(s.status)): s.count for s in app.admin.stats()}
    assert counts == {("emails", "pending"): 1, ("reports", "dead"): 1}
    assert app.admin.list_processes().processes == []
    assert app.admin.list_processes(every=True).processes == []


# -- every change is one event and one log line --------------------------------------------


class Heard:
    """An observer of the app's `Administered` events."""

    def __init__(self) -> None:
        self.events: list[Administered] = []

    def subscriptions(self) -> list[Subscription[Administered]]:
        return [Subscription(Administered, self.events.append)]


def test_each_change_is_one_event_to_the_apps_observers_and_one_log_line(
    app: chronoq.App, caplog: pytest.LogCaptureFixture
) -> None:
    heard = Heard()
    app.observers.subscribe(heard)
    gone = dead(app)
    pending = app.enqueue("send_email").id
    with caplog.at_level(logging.INFO, logger="chronoq.admin"):
        app.admin.cancel_job(pending)
        app.admin.requeue_dead(DeadRequeueParams(ids=[gone, 424242]))
        app.admin.pause_queue("emails")
        app.admin.resume_queue("emails")
        app.admin.pause_schedule("nightly")
        app.admin.resume_schedule("nightly")
        triggered = app.admin.trigger_schedule("nightly")
        app.admin.limit_key("emails", "customer:*", rate="5/s")
        app.admin.unlimit_key("emails", "customer:*")
        app.admin.remove_schedule("nightly")
        assert app.admin.purge_dead(DeadPurgeParams(ids=[gone])) == 0
    assert [(e.action, e.target, e.result) for e in heard.events] == [
        ("job.cancel", f"job {pending}", "cancelled (was pending)"),
        ("dead.requeue", f"dead jobs {gone}, 424242", "requeued 1, 1 not found"),
        ("queue.pause", "queue emails", "paused"),
        ("queue.resume", "queue emails", "resumed"),
        ("schedule.pause", "schedule nightly", "paused"),
        ("schedule.resume", "schedule nightly", "resumed"),
        ("schedule.trigger", "schedule nightly", f"enqueued job {triggered.id}"),
        ("queue.limit_key", "queue emails keys customer:*", "rate 5/s"),
        ("queue.unlimit_key", "queue emails keys customer:*", "removed"),
        ("schedule.remove", "schedule nightly", "removed"),
        ("dead.purge", f"dead jobs {gone}", "purged 0"),
    ]
    lines = [r for r in caplog.records if r.name == "chronoq.admin"]
    first = f"job.cancel job {pending}: cancelled (was pending)"
    assert lines[0].getMessage() == first
    assert [getattr(r, "action", None) for r in lines] == [
        f"admin.{e.action}" for e in heard.events
    ]


def test_a_refused_operation_is_no_event(app: chronoq.App) -> None:
    heard = Heard()
    app.observers.subscribe(heard)
    with pytest.raises(chronoq.QueueNotFound):
        app.admin.pause_queue("emials")
    with pytest.raises(chronoq.ScheduleNotFound):
        app.admin.remove_schedule("nighty")
    assert heard.events == []
