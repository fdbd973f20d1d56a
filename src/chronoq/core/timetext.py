"""A schedule's instants as people read them, alike in `chronoq schedule` and on the dashboard.

A schedule that ticks on whole minutes reads to the minute, on its own wall clock with the
offset: ``2026-12-02 09:00 +01:00``. One that ticks more than once a minute, or at seconds past
the minute (``every 10s``, ``every 90s``, ``*/10 * * * * *``, ``30 * * * * *``), reads to the
second, every instant of it, so two different ticks never read alike:
``2026-12-02 09:00:10 +01:00``. So does any instant that is not on a whole minute (a tick fired
late or with jitter).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from chronoq.core.cron import Cadence, IntervalCadence, ticks_within_the_minute, zone_info
from chronoq.core.schedules import Schedule
from chronoq.errors import InvalidSchedule

_MINUTE = timedelta(minutes=1)


def needs_seconds(cadence: Cadence, moments: Iterable[datetime | None] = ()) -> bool:
    """Whether the instants of a schedule on `cadence` must be written with their seconds."""
    if isinstance(cadence, IntervalCadence):
        off_the_minute = bool(cadence.period % _MINUTE)
    else:
        off_the_minute = ticks_within_the_minute(cadence)
    return off_the_minute or any(_off_the_minute(moment) for moment in moments)


def schedule_time(moment: datetime | None, *, seconds: bool) -> str:
    """`moment` on its own clock, with its offset: to the minute, or to the second."""
    if moment is None:
        return "-"
    shown = f"{moment:%Y-%m-%d %H:%M:%S}" if seconds else f"{moment:%Y-%m-%d %H:%M}"
    offset = _offset(moment)
    return f"{shown} {offset}" if offset else shown


def schedule_times(schedule: Schedule, moments: Sequence[datetime | None]) -> list[str]:
    """`moments` of `schedule`, on its zone's wall clock, all to the minute or all to the
    second. A stored cadence or zone that no longer parses shows them in UTC, to the second."""
    try:
        cadence = schedule.parsed_cadence()
        zone = zone_info(schedule.zone)
    except InvalidSchedule:
        return [schedule_time(m.astimezone(UTC) if m else None, seconds=True) for m in moments]
    seconds = needs_seconds(cadence, moments)
    return [schedule_time(m.astimezone(zone) if m else None, seconds=seconds) for m in moments]


def _off_the_minute(moment: datetime | None) -> bool:
    return moment is not None and (moment.second != 0 or moment.microsecond != 0)


def _offset(moment: datetime) -> str:
    offset = moment.utcoffset()
    if offset is None:
        return ""
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // _MINUTE
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
