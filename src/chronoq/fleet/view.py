"""The fleet registry as people and programs read it: one shape for `chronoq processes`,
`GET /api/v1/processes`, the dashboard's Processes page and the process gauges of `/metrics`,
and the one warning all of them give when schedules wait for a scheduler nobody runs.

```
 store.process_list(...) ──► Fleet ──► fleet_json(fleet)        chronoq processes --json, the API
                                  ├──► process_view(record, now)  the CLI's table, the dashboard
                                  ├──► kind_totals(fleet)         chronoq_processes{kind}, ...
 store.schedule_list() ───────────┴──► scheduler_warning(...)     schedule list, overview, schedules
```

Ages are measured on the database clock (`Fleet.db_now`), as liveness is, so a reader whose
clock is off still reads "seen 2s ago" right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chronoq.core.cron import preview
from chronoq.core.durations import format_duration
from chronoq.core.schedules import Schedule
from chronoq.errors import InvalidSchedule
from chronoq.fleet.records import PROCESS_KINDS, Fleet, ProcessRecord

__all__ = [
    "SCHEDULER_COMMAND",
    "KindTotals",
    "ProcessView",
    "SchedulerWarning",
    "fleet_json",
    "kind_totals",
    "next_fire",
    "ordered",
    "process_view",
    "scheduler_warning",
]

SCHEDULER_COMMAND = "chronoq scheduler --app MODULE:APP"
_STATE_ORDER = ("alive", "stopped", "gone")


@dataclass(frozen=True, slots=True)
class ProcessView:
    """One process as every surface shows it. `seen_ago`: seconds since its last refresh, on
    the database clock; `state`: "alive", "stopped" (it said so) or "gone" (it stopped
    refreshing its record)."""

    id: str
    kind: str
    state: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    concurrency: int | None
    running: int
    duties: tuple[str, ...]
    task_names: tuple[str, ...]
    tasks: tuple[dict[str, Any], ...]
    started_at: datetime
    seen_at: datetime
    expires_at: datetime
    stopped_at: datetime | None
    seen_ago: float

    @property
    def alive(self) -> bool:
        return self.state == "alive"

    @property
    def seen_ago_text(self) -> str:
        """ "1.2s ago", "4m05s ago": how long since the process last refreshed its record."""
        return f"{format_duration(timedelta(seconds=self.seen_ago))} ago"

    @property
    def load_text(self) -> str:
        """Jobs running out of the slots it has: "2/10" (a worker), "0" (no slots)."""
        if self.concurrency is None:
            return str(self.running)
        return f"{self.running}/{self.concurrency}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "queues": list(self.queues),
            "concurrency": self.concurrency,
            "running": self.running,
            "duties": list(self.duties),
            "tasks": list(self.tasks),
            "started_at": self.started_at.isoformat(),
            "seen_at": self.seen_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "stopped_at": self.stopped_at.isoformat() if self.stopped_at else None,
            "seen_ago_seconds": self.seen_ago,
        }


def process_view(record: ProcessRecord, db_now: datetime) -> ProcessView:
    info = record.info
    return ProcessView(
        id=info.id,
        kind=info.kind,
        state=record.state,
        host=info.host,
        pid=info.pid,
        version=info.version,
        queues=info.queues,
        concurrency=info.concurrency,
        running=info.running,
        duties=info.duties,
        task_names=tuple(sorted(task.name for task in info.tasks)),
        tasks=tuple(task.to_json() for task in info.tasks),
        started_at=record.started_at,
        seen_at=record.seen_at,
        expires_at=record.expires_at,
        stopped_at=record.stopped_at,
        seen_ago=max(0.0, (db_now - record.seen_at).total_seconds()),
    )


def _rank(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def ordered(fleet: Fleet) -> list[ProcessView]:
    """Every record of `fleet` as a view: live ones first, then by kind (workers, schedulers,
    servers), host, pid and id, so a listing keeps its rows in place from one read to the next."""
    views = [process_view(record, fleet.db_now) for record in fleet.processes]
    return sorted(
        views,
        key=lambda v: (
            _rank(_STATE_ORDER, v.state),
            _rank(PROCESS_KINDS, v.kind),
            v.host,
            v.pid,
            v.id,
        ),
    )


def fleet_json(fleet: Fleet) -> dict[str, Any]:
    """The document `chronoq processes --json` prints and `GET /api/v1/processes` answers."""
    return {
        "db_now": fleet.db_now.isoformat(),
        "processes": [view.to_json() for view in ordered(fleet)],
    }


@dataclass(frozen=True, slots=True)
class KindTotals:
    """The live processes of one kind: how many, the jobs they run now and their slots."""

    processes: int = 0
    running: int = 0
    concurrency: int = 0


def kind_totals(fleet: Fleet) -> dict[str, KindTotals]:
    """Totals of the live processes per kind; every kind is present, with zeros when none runs
    (so a gauge says "no scheduler" rather than vanishing)."""
    totals = {kind: KindTotals() for kind in PROCESS_KINDS}
    for record in fleet.alive:
        was = totals.get(record.info.kind, KindTotals())
        totals[record.info.kind] = KindTotals(
            was.processes + 1,
            was.running + record.info.running,
            was.concurrency + (record.info.concurrency or 0),
        )
    return totals


# -- schedules without a scheduler ------------------------------------------------------------


def next_fire(schedule: Schedule) -> datetime | None:
    """When the schedule fires next: the tick the scheduler planned, or for a schedule no
    scheduler has handled yet the first tick after its cursor. None: paused, or a cadence that
    no longer parses."""
    if schedule.paused:
        return None
    if schedule.next_tick is not None:
        return schedule.next_tick
    try:
        return preview(schedule.parsed_cadence(), schedule.tick_cursor, 1)[0]
    except InvalidSchedule:
        return None


@dataclass(frozen=True, slots=True)
class SchedulerWarning:
    """Active schedules exist and no scheduler is alive to fire them. `overdue`: those whose
    next fire time has passed already; `late_by`: how long ago the oldest of them was due."""

    active: int
    overdue: int
    late_by: timedelta | None
    command: str = SCHEDULER_COMMAND

    @property
    def headline(self) -> str:
        if self.overdue and self.late_by is not None:
            verb = "is" if self.overdue == 1 else "are"
            return (
                f"no scheduler is running: {_count(self.overdue, 'schedule')} {verb} overdue "
                f"(the oldest by {format_duration(self.late_by)}) and no schedule fires until "
                "one runs"
            )
        return (
            f"no scheduler is running: {_count(self.active, 'active schedule')} will not fire "
            "until one runs"
        )

    @property
    def text(self) -> str:
        """The warning in one line: what is wrong and the command that fixes it."""
        return f"{self.headline}; start `{self.command}`"


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def scheduler_warning(schedules: Iterable[Schedule], fleet: Fleet) -> SchedulerWarning | None:
    """The warning to give when active schedules wait for a scheduler and none is alive (on
    the database clock of `fleet`); None when there is nothing to warn about."""
    active = [schedule for schedule in schedules if not schedule.paused]
    if not active or fleet.of_kind("scheduler"):
        return None
    due = [fire for s in active if (fire := next_fire(s)) is not None and fire <= fleet.db_now]
    late_by = fleet.db_now - min(due) if due else None
    return SchedulerWarning(active=len(active), overdue=len(due), late_by=late_by)
