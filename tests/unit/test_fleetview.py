"""The one shape of fleet registry records (chronoq.fleet.view): JSON, order, ages on the
database clock, totals per kind, and the warning about schedules no scheduler fires."""

from __future__ import annotations

import inspect
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from chronoq.core.misfire import Misfire
from chronoq.core.schedules import Schedule
from chronoq.fleet.records import Fleet, ProcessInfo, ProcessRecord, TaskInfo
from chronoq.fleet.view import (
    KindTotals,
    fleet_json,
    kind_totals,
    next_fire,
    ordered,
    process_view,
    scheduler_warning,
)

NOW = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)


def _task() -> TaskInfo:
    def send_email(to: str, subject: str = "") -> None: ...

    return TaskInfo.describe(
        name="send_email",
        queue="emails",
        priority=0,
        max_attempts=5,
        lease=30.0,
        timeout=None,
        misfire=Misfire.parse("run_late", None),
        signature=inspect.signature(send_email),
    )


def _record(
    pid: int = 1,
    kind: str = "worker",
    *,
    host: str = "a",
    alive: bool = True,
    seen: float = 2.0,
    stopped: bool = False,
    **fields: object,
) -> ProcessRecord:
    values: dict[str, object] = {
        "id": f"{host}:{pid}:x",
        "kind": kind,
        "host": host,
        "pid": pid,
        "version": "1.2.3",
    } | fields
    seen_at = NOW - timedelta(seconds=seen)
    return ProcessRecord(
        info=ProcessInfo(**values),  # type: ignore[arg-type]
        started_at=NOW - timedelta(hours=1),
        seen_at=seen_at,
        expires_at=seen_at + timedelta(seconds=30),
        stopped_at=seen_at if stopped else None,
        alive=alive,
    )


def _schedule(
    cadence: str = "every 1m",
    *,
    paused: bool = False,
    next_tick: datetime | None = None,
    cursor: datetime = NOW,
) -> Schedule:
    return Schedule(
        name="nightly",
        cadence=cadence,
        zone="UTC",
        task="cleanup",
        payload={},
        queue="default",
        priority=0,
        misfire="coalesce",
        misfire_grace=60.0,
        catch_up=None,
        jitter=0.0,
        paused=paused,
        origin="cli",
        tick_cursor=cursor,
        next_tick=next_tick,
        fired=0,
        late=0,
        skipped=0,
        coalesced=0,
        lateness_total=0.0,
        lateness_max=0.0,
        last_fired=None,
        created_at=cursor,
        updated_at=cursor,
    )


def test_a_record_in_json_has_every_field_and_its_age_on_the_database_clock() -> None:
    record = _record(
        queues=("emails", "sms"),
        concurrency=10,
        running=3,
        duties=("scheduler",),
        tasks=(_task(),),
        seen=2.5,
    )
    shown = process_view(record, NOW).to_json()
    assert shown == {
        "id": "a:1:x",
        "kind": "worker",
        "state": "alive",
        "host": "a",
        "pid": 1,
        "version": "1.2.3",
        "queues": ["emails", "sms"],
        "concurrency": 10,
        "running": 3,
        "duties": ["scheduler"],
        "tasks": [_task().to_json()],
        "started_at": "2030-01-31T08:00:00+00:00",
        "seen_at": "2030-01-31T08:59:57.500000+00:00",
        "expires_at": "2030-01-31T09:00:27.500000+00:00",
        "stopped_at": None,
        "seen_ago_seconds": 2.5,
    }


def test_people_read_the_load_and_the_age() -> None:
    worker = process_view(_record(concurrency=10, running=3, seen=245), NOW)
    assert (worker.load_text, worker.seen_ago_text) == ("3/10", "4m05s ago")
    scheduler = process_view(_record(kind="scheduler", seen=0.2), NOW)
    assert (scheduler.load_text, scheduler.seen_ago_text) == ("0", "200ms ago")
    # A reader's clock ahead of the database's never shows an age below zero.
    assert process_view(_record(seen=-1), NOW).seen_ago == 0.0


def test_live_processes_come_first_then_by_kind_host_and_pid() -> None:
    records = [
        _record(9, host="b", alive=False, stopped=True),
        _record(2, "server"),
        _record(5, "scheduler"),
        _record(3, host="b"),
        _record(7, alive=False),
        _record(1),
    ]
    views = ordered(Fleet(records, NOW))
    assert [(v.state, v.kind, v.host, v.pid) for v in views] == [
        ("alive", "worker", "a", 1),
        ("alive", "worker", "b", 3),
        ("alive", "scheduler", "a", 5),
        ("alive", "server", "a", 2),
        ("stopped", "worker", "b", 9),
        ("gone", "worker", "a", 7),
    ]
    document = fleet_json(Fleet(records, NOW))
    assert document["db_now"] == NOW.isoformat()
    assert [p["pid"] for p in document["processes"]] == [1, 3, 5, 2, 9, 7]


def test_totals_per_kind_count_live_processes_only_and_name_every_kind() -> None:
    fleet = Fleet(
        [
            _record(1, concurrency=10, running=4),
            _record(2, concurrency=5, running=1),
            _record(3, concurrency=8, running=8, alive=False),
            _record(4, "server"),
        ],
        NOW,
    )
    assert kind_totals(fleet) == {
        "worker": KindTotals(processes=2, running=5, concurrency=15),
        "scheduler": KindTotals(),
        "server": KindTotals(processes=1),
    }


def test_no_warning_without_active_schedules_or_with_a_live_scheduler() -> None:
    nobody = Fleet([_record(1)], NOW)
    assert scheduler_warning([], nobody) is None
    assert scheduler_warning([_schedule(paused=True)], nobody) is None
    scheduler = Fleet([_record(2, "scheduler")], NOW)
    assert scheduler_warning([_schedule()], scheduler) is None
    stopped = Fleet([_record(2, "scheduler", alive=False, stopped=True)], NOW)
    assert scheduler_warning([_schedule()], stopped) is not None


def test_active_schedules_without_a_scheduler_are_a_warning_with_the_command() -> None:
    warning = scheduler_warning([_schedule(), _schedule(paused=True)], Fleet([], NOW))
    assert warning is not None
    assert (warning.active, warning.overdue, warning.late_by) == (1, 0, None)
    assert warning.text == (
        "no scheduler is running: 1 active schedule will not fire until one runs; "
        "start `chronoq scheduler --app MODULE:APP`"
    )


def test_overdue_schedules_say_how_late_the_oldest_is() -> None:
    planned = _schedule(next_tick=NOW - timedelta(minutes=4, seconds=5))
    # Never handled by a scheduler: its next fire is the first tick after its cursor.
    unhandled = _schedule(cursor=NOW - timedelta(minutes=2, seconds=30))
    waiting = _schedule(next_tick=NOW + timedelta(minutes=1))
    warning = scheduler_warning([planned, unhandled, waiting], Fleet([], NOW))
    assert warning is not None
    assert (warning.active, warning.overdue) == (3, 2)
    assert warning.late_by == timedelta(minutes=4, seconds=5)
    assert warning.text == (
        "no scheduler is running: 2 schedules are overdue (the oldest by 4m05s) and no "
        "schedule fires until one runs; start `chronoq scheduler --app MODULE:APP`"
    )


def test_the_next_fire_of_a_schedule() -> None:
    assert next_fire(_schedule(next_tick=NOW)) == NOW
    assert next_fire(_schedule(cursor=NOW)) == NOW + timedelta(minutes=1)
    assert next_fire(_schedule(paused=True, next_tick=NOW)) is None
    assert next_fire(replace(_schedule(), cadence="not a cadence")) is None
