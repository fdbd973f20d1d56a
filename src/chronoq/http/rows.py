"""What the dashboard's pages list beyond a store's records: a page of jobs with the links
to its neighbours, and a schedule with its next fire times."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from chronoq.core.cron import preview
from chronoq.core.jobs import Job
from chronoq.core.schedules import Schedule
from chronoq.core.timetext import schedule_times
from chronoq.errors import InvalidSchedule
from chronoq.fleet.view import next_fire
from chronoq.http.templating import seconds

SHOWN_TICKS = 3  # upcoming fire times listed per schedule


@dataclass(frozen=True, slots=True)
class JobPage:
    """Jobs of one page; `older` and `newest` are query strings (None: no such link)."""

    jobs: list[Job]
    older: str | None
    newest: str | None


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """`unfired_at`: with no scheduler running, the database clock then (its ticks wait)."""

    schedule: Schedule
    next_ticks: list[datetime]
    unfired_at: datetime | None = None

    @property
    def overdue(self) -> bool:
        """No scheduler runs, and the tick it waits for has passed already."""
        if self.unfired_at is None:
            return False
        fire = next_fire(self.schedule)
        return fire is not None and fire <= self.unfired_at

    @property
    def next_times(self) -> list[str]:
        """The next fire times as `chronoq schedule` writes them (to the second if needed)."""
        return schedule_times(self.schedule, self.next_ticks)

    @property
    def late_text(self) -> str:
        s = self.schedule
        if not s.late:
            return "0"
        return f"{s.late} (mean {seconds(s.lateness_mean)}, max {seconds(s.lateness_max)})"


def upcoming(schedule: Schedule) -> list[datetime]:
    """Its next fire times on its own wall clock (none while paused, or if the cadence no longer
    parses, which the page shows rather than failing)."""
    if schedule.paused:
        return []
    start = schedule.tick_cursor
    if schedule.next_tick is not None:
        start = schedule.next_tick - timedelta(microseconds=1)
    try:
        return preview(schedule.parsed_cadence(), start, SHOWN_TICKS)
    except InvalidSchedule:
        return []
