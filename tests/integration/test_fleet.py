"""The fleet registry at run time: workers and schedulers record themselves, a worker hands jobs
of tasks it does not know to the live workers that do (rolling deploys), and producers without
the handlers' code enqueue by name with the settings the workers reported."""

from __future__ import annotations

import inspect
import threading
from datetime import timedelta

import pytest

import chronoq
from chronoq.core.jobs import JobStatus, Outcome
from chronoq.core.misfire import Misfire
from chronoq.fleet.records import ProcessInfo, TaskInfo
from chronoq.observability.events import JobsHandedOff, Subscription
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.storage.base import JobListParams, ProcessBeatParams, ProcessListParams
from chronoq.testing import StaticElector
from tests.helpers import running_worker, wait_until
from tests.integration.cli_support import run_cli


@pytest.fixture
def app(dsn: str) -> chronoq.App:
    with chronoq.App(dsn) as application:
        yield application  # type: ignore[misc]


def _new_worker(queue: str = "emails", task: str = "send_email", **fields: object) -> ProcessInfo:
    """The record of a worker of the next release, running `task` on `queue`."""

    def handler(to: str, subject: str = "") -> None: ...

    info = TaskInfo.describe(
        name=task,
        queue=queue,
        priority=3,
        max_attempts=7,
        lease=45.0,
        timeout=None,
        misfire=Misfire.parse("run_late", None),
        signature=inspect.signature(handler),
    )
    values: dict[str, object] = {
        "id": "new:1:abc",
        "kind": "worker",
        "host": "new",
        "pid": 1,
        "version": "9.9.9",
        "queues": (queue,),
        "concurrency": 8,
        "tasks": (info,),
    } | fields
    return ProcessInfo(**values)  # type: ignore[arg-type]


class HandOffs:
    def __init__(self) -> None:
        self.events: list[JobsHandedOff] = []
        self.seen = threading.Event()

    def subscriptions(self) -> list[Subscription[JobsHandedOff]]:
        return [Subscription(JobsHandedOff, self._handed)]

    def _handed(self, event: JobsHandedOff) -> None:
        self.events.append(event)
        self.seen.set()


def test_a_running_worker_is_in_the_registry_and_marks_itself_stopped(app: chronoq.App) -> None:
    @app.task(queue="emails", max_attempts=4, lease=30, timeout=10)
    def send_email(to: str, subject: str = "") -> None: ...

    options = chronoq.WorkerOptions(concurrency=3, beat_interval=0.2)
    with running_worker(app, options) as (worker, _):
        assert worker.beacon.recorded.wait(20)
        (record,) = app.store.process_list(ProcessListParams()).processes
        info = record.info
        assert (info.id, info.kind, info.queues, info.concurrency) == (
            worker.worker_id,
            "worker",
            ("emails",),
            3,
        )
        assert info.version == chronoq.__version__
        (task,) = info.tasks
        assert (task.name, task.queue, task.max_attempts, task.lease, task.timeout) == (
            "send_email",
            "emails",
            4,
            30.0,
            10.0,
        )
        assert [(p.name, p.required) for p in task.params] == [("to", True), ("subject", False)]
    assert app.store.process_list(ProcessListParams()).processes == []
    (stopped,) = app.store.process_list(ProcessListParams(all=True)).processes
    assert stopped.state == "stopped"


def test_a_worker_reports_the_jobs_it_is_running(app: chronoq.App) -> None:
    release = threading.Event()

    @app.task
    def hold() -> None:
        release.wait(20)

    app.enqueue("hold")
    with running_worker(app, chronoq.WorkerOptions(beat_interval=0.1)):
        wait_until(
            lambda: (
                [r.info.running for r in app.store.process_list(ProcessListParams()).processes]
                == [1]
            ),
            what="the record to show one running job",
        )
        release.set()


def test_the_leading_scheduler_records_its_duty(app: chronoq.App) -> None:
    options = SchedulerOptions(beat_interval=0.1, election_interval=0.05, leader_ttl=1.0)
    scheduler = Scheduler(app, options, elector=StaticElector(holder="s1"), holder="s1")
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        record = wait_until(
            lambda: next(
                (
                    r
                    for r in app.store.process_list(ProcessListParams()).processes
                    if r.info.duties == ("scheduler",)
                ),
                None,
            ),
            what="the scheduler's record with its duty",
        )
        assert (record.info.id, record.info.kind) == ("s1", "scheduler")
    finally:
        scheduler.request_stop()
        thread.join(20)
    (stopped,) = app.store.process_list(ProcessListParams(all=True)).processes
    assert stopped.state == "stopped" and stopped.info.duties == ()


def _produce(dsn: str, task: str, payload: dict[str, str], queue: str) -> int:
    """Enqueue as the new release's producer does (the old worker's app does not know it)."""
    with chronoq.App(dsn) as producer:
        return producer.enqueue(task, payload, queue=queue).id


def test_an_old_worker_hands_a_new_task_to_the_worker_that_knows_it(
    app: chronoq.App, dsn: str
) -> None:
    """A rolling deploy: the job is given back unstarted, without using an attempt, and is not
    claimed again at once; the old worker's own tasks run as usual."""

    @app.task(queue="emails")
    def old_task() -> None: ...

    app.store.process_beat(ProcessBeatParams(_new_worker(), ttl=60))
    new_job = _produce(dsn, "send_email", {"to": "a@example.com"}, "emails")
    old_job = app.enqueue("old_task").id
    handoffs = HandOffs()
    app.observers.subscribe(handoffs)
    options = chronoq.WorkerOptions(hand_off_delay=60, poll_interval=0.2)
    with running_worker(app, options) as (_, signals):
        assert handoffs.seen.wait(20)
        signals.wait_for(lambda: any(job.id == old_job for job, _, _ in signals.finishes))
    (event,) = handoffs.events
    assert event.handed_off == {new_job} and event.delay == 60
    job = app.get_job(new_job)
    assert job is not None
    assert (job.status, job.attempts, job.errors) == (JobStatus.PENDING, 0, [])
    assert job.run_at is not None and job.run_at > app.store.db_now() + timedelta(seconds=50)


def test_a_task_no_live_worker_knows_is_dead_lettered(app: chronoq.App, dsn: str) -> None:
    @app.task(queue="emails")
    def old_task() -> None: ...

    # The new worker stopped: nobody alive knows the task any more.
    app.store.process_beat(ProcessBeatParams(_new_worker(), ttl=60))
    app.store.process_stop("new:1:abc")
    job_id = _produce(dsn, "send_email", {"to": "a"}, "emails")
    with running_worker(app, chronoq.WorkerOptions(poll_interval=0.2)) as (_, signals):
        signals.wait_for(lambda: any(o == Outcome.DEAD for _, o, _ in signals.finishes))
    job = app.get_job(job_id)
    assert job is not None and job.status is JobStatus.DEAD
    assert job.errors[-1]["error"] == "UnknownTask"
    assert "no live worker serving queue 'emails' knows it" in job.errors[-1]["message"]


def test_a_producer_without_the_code_takes_the_settings_the_workers_reported(dsn: str) -> None:
    with chronoq.App(dsn) as setup:
        setup.migrate()
        setup.store.process_beat(ProcessBeatParams(_new_worker(), ttl=60))
    result = run_cli("enqueue", "send_email", "--payload", '{"to": "a"}', "--json", "--dsn", dsn)
    assert result.code == 0, result.err
    with chronoq.App(dsn) as app:
        job = app.get_job(result.json()["id"])
    assert job is not None
    assert (job.queue, job.priority, job.max_attempts, job.lease_seconds) == (
        "emails",
        3,
        7,
        45.0,
    )


def test_a_producer_without_the_code_refuses_what_no_worker_knows(dsn: str) -> None:
    with chronoq.App(dsn) as setup:
        setup.migrate()
        setup.store.process_beat(ProcessBeatParams(_new_worker(), ttl=60))
    typo = run_cli("enqueue", "send_emial", "--payload", '{"to": "a"}', "--dsn", dsn)
    assert typo.code == 2
    assert "unknown task 'send_emial'" in typo.err and "did you mean 'send_email'?" in typo.err
    misfit = run_cli("enqueue", "send_email", "--payload", '{"too": "a"}', "--dsn", dsn)
    assert misfit.code == 2 and "too" in misfit.err
    ahead = run_cli("enqueue", "resize", "--queue", "images", "--json", "--dsn", dsn)
    assert ahead.code == 0, ahead.err  # a task not deployed yet, on the queue it will use
    with chronoq.App(dsn) as app:
        job = app.get_job(ahead.json()["id"])
        assert job is not None and job.queue == "images"
        assert {j.task for j in app.store.job_list(JobListParams())} == {"resize"}
