"""The fleet registry on every store: beats, liveness on the database clock, stops, expiry,
the catalog of tasks, and handing jobs off without using an attempt."""

from __future__ import annotations

import inspect
from datetime import timedelta

from chronoq.core.jobs import JobStatus
from chronoq.core.misfire import Misfire
from chronoq.fleet.records import ProcessInfo, TaskInfo, catalog
from chronoq.storage.base import (
    JobHandOffParams,
    JobLeaseRef,
    ProcessBeatParams,
    ProcessListParams,
    ProcessSessionsEndParams,
)

from .support import Store, claim, insert, params


def _task(name: str = "send_email", queue: str = "emails", **settings: object) -> TaskInfo:
    def handler(to: str, subject: str = "", *, cc: str = "") -> None: ...

    fields: dict[str, object] = {
        "name": name,
        "queue": queue,
        "priority": 0,
        "max_attempts": 5,
        "lease": 30.0,
        "timeout": None,
        "misfire": Misfire.parse("run_late", None),
        "signature": inspect.signature(handler),
    } | settings
    return TaskInfo.describe(**fields)  # type: ignore[arg-type]


def _worker(pid: int = 1, tasks: tuple[TaskInfo, ...] = (), **fields: object) -> ProcessInfo:
    values: dict[str, object] = {
        "id": f"host:{pid}:abc",
        "kind": "worker",
        "host": "host",
        "pid": pid,
        "version": "0.1.0",
        "queues": ("emails",),
        "concurrency": 4,
        "tasks": tasks or (_task(),),
    } | fields
    return ProcessInfo(**values)  # type: ignore[arg-type]


def test_a_beating_process_is_listed_alive_with_everything_it_said(store: Store) -> None:
    info = _worker(running=2, duties=("scheduler",))
    store.process_beat(ProcessBeatParams(info, ttl=30))
    fleet = store.process_list(ProcessListParams())
    (record,) = fleet.processes
    assert record.info == info
    assert record.alive and record.state == "alive"
    assert record.started_at == record.seen_at <= fleet.db_now < record.expires_at
    assert record.info.tasks[0].params[0].name == "to"


def test_a_process_that_stops_beating_is_no_longer_alive(store: Store) -> None:
    store.process_beat(ProcessBeatParams(_worker(), ttl=5))
    later = store.db_now() + timedelta(seconds=6)
    assert store.process_list(ProcessListParams(now=later)).processes == []
    (gone,) = store.process_list(ProcessListParams(all=True, now=later)).processes
    assert not gone.alive and gone.state == "gone"


def test_a_beat_refreshes_the_record_and_keeps_its_start(store: Store) -> None:
    start = store.db_now()
    store.process_beat(ProcessBeatParams(_worker(running=0), ttl=5, now=start))
    later = start + timedelta(seconds=4)
    store.process_beat(ProcessBeatParams(_worker(running=3), ttl=5, now=later))
    (record,) = store.process_list(ProcessListParams(now=later + timedelta(seconds=4))).processes
    assert record.started_at == start and record.seen_at == later
    assert record.info.running == 3


def test_a_stopped_process_is_kept_as_recent_then_pruned(store: Store) -> None:
    store.process_beat(ProcessBeatParams(_worker(running=2), ttl=30))
    assert store.process_stop("host:1:abc")
    assert not store.process_stop("host:1:abc")  # already stopped
    assert store.process_list(ProcessListParams()).processes == []
    (stopped,) = store.process_list(ProcessListParams(all=True)).processes
    assert stopped.state == "stopped" and stopped.info.running == 0
    assert store.process_prune(recent=timedelta(days=1)) == 0
    assert store.process_prune(recent=timedelta(0)) == 1
    assert store.process_list(ProcessListParams(all=True)).processes == []


def test_a_stopped_process_that_beats_again_is_alive_again(store: Store) -> None:
    store.process_beat(ProcessBeatParams(_worker(), ttl=30))
    store.process_stop("host:1:abc")
    store.process_beat(ProcessBeatParams(_worker(), ttl=30))
    (record,) = store.process_list(ProcessListParams()).processes
    assert record.alive and record.stopped_at is None


def test_the_list_is_most_recently_seen_first(store: Store) -> None:
    start = store.db_now()
    for pid in (1, 2, 3):
        moment = start + timedelta(seconds=pid)
        store.process_beat(ProcessBeatParams(_worker(pid), ttl=30, now=moment))
    fleet = store.process_list(ProcessListParams(now=start + timedelta(seconds=4)))
    assert [record.info.pid for record in fleet.processes] == [3, 2, 1]


def test_the_catalog_takes_the_newest_live_process_settings(store: Store) -> None:
    start = store.db_now()
    old = _worker(1, tasks=(_task(queue="mail"),))
    new = _worker(2, tasks=(_task(queue="emails", max_attempts=9), _task("digest", "reports")))
    store.process_beat(ProcessBeatParams(old, ttl=30, now=start))
    store.process_beat(ProcessBeatParams(new, ttl=30, now=start + timedelta(seconds=1)))
    tasks = catalog(store.process_list(ProcessListParams(all=True)).processes)
    assert sorted(tasks) == ["digest", "send_email"]
    assert tasks["send_email"].queue == "emails" and tasks["send_email"].max_attempts == 9
    assert tasks["send_email"].seen_in == ("host:2:abc", "host:1:abc")
    assert tasks["send_email"].payload_shape.misfit({"to": "a"}) == ""
    assert "to" in tasks["send_email"].payload_shape.misfit({"subject": "hi"})


def test_runs_task_counts_only_other_live_workers_serving_the_queue(store: Store) -> None:
    store.process_beat(ProcessBeatParams(_worker(1), ttl=30))
    store.process_beat(ProcessBeatParams(_worker(2, queues=("other",)), ttl=30))
    fleet = store.process_list(ProcessListParams())
    assert fleet.runs_task("send_email", "emails")
    assert not fleet.runs_task("send_email", "emails", besides="host:1:abc")
    assert not fleet.runs_task("unknown", "emails")


def test_a_handed_off_job_keeps_its_attempts_and_waits(store: Store) -> None:
    (job_id,) = insert(store, params())
    (job,) = claim(store)
    handed = store.job_hand_off_many(
        JobHandOffParams([JobLeaseRef(job.id, job.lease_token)], delay=60)
    )
    assert handed == {job_id}
    after = store.job_get(job_id)
    assert after is not None
    assert after.status is JobStatus.PENDING and after.attempts == 0
    assert after.run_at is not None and after.run_at > store.db_now() + timedelta(seconds=50)
    assert claim(store) == []


def test_a_hand_off_with_a_stale_token_is_refused(store: Store) -> None:
    insert(store, params())
    (job,) = claim(store)
    stale = JobLeaseRef(job.id, job.lease_token - 1)
    assert store.job_hand_off_many(JobHandOffParams([stale], delay=1)) == set()


def test_ending_the_sessions_of_a_worker_that_has_none_ends_nothing(store: Store) -> None:
    # PostgreSQL ends named sessions (tests/integration/test_poison.py); SQLite has none.
    assert store.process_sessions_end(ProcessSessionsEndParams("gone:1:abc", timeout=1.0)) == 0
    assert store.process_list(ProcessListParams()).processes == []
