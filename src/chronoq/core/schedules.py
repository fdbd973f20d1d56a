"""Recurring schedules: their definition as declared, and their state as stored.

A schedule says when (a cron expression or `every <duration>`, in an IANA time zone), what (a
task, its payload, queue and priority), and what to do about ticks the scheduler got to too late
(its misfire policy and grace, see `chronoq.core.misfire`). `jitter` spreads each tick's run
over a window, by an offset every scheduler computes alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from chronoq.core.cron import Cadence, parse_cadence, shortest_gap
from chronoq.core.durations import format_duration, parse_duration
from chronoq.core.misfire import Misfire, MisfirePolicy
from chronoq.core.validate import check_name, check_schedule_name
from chronoq.errors import InvalidDuration, InvalidSchedule

DEFAULT_SCHEDULE_MISFIRE = MisfirePolicy.COALESCE
MAX_JITTER = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# A schedule's definition as the store keeps it: what an upsert writes and replaces. The rest
# of a stored schedule (pause, cursor, counters, stamps) is the store's own.
SCHEDULE_DEFINITION = (
    "name",
    "cadence",
    "zone",
    "task",
    "payload",
    "queue",
    "priority",
    "misfire",
    "misfire_grace",
    "catch_up",
    "jitter",
    "origin",
)
# The fields of a stored schedule that hold instants.
SCHEDULE_TIMES = ("tick_cursor", "next_tick", "last_fired", "created_at", "updated_at")


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A validated schedule definition, ready to store (see `ScheduleSpec.build`)."""

    name: str
    cadence: str
    zone: str
    task: str
    payload: dict[str, Any]
    queue: str
    priority: int
    misfire: Misfire
    jitter: timedelta

    @classmethod
    def build(
        cls,
        *,
        name: str,
        cadence: str,
        task: str,
        queue: str,
        payload: dict[str, Any] | None = None,
        zone: str = "UTC",
        priority: int = 0,
        misfire: str | MisfirePolicy = DEFAULT_SCHEDULE_MISFIRE,
        misfire_grace: timedelta | str | float | None = None,
        catch_up: int | None = None,
        jitter: timedelta | str | float | None = None,
        now: datetime | None = None,
    ) -> ScheduleSpec:
        """`now` is where a cron expression's ticks start to be looked at to check the jitter
        against them (`App.schedule_spec` passes the time; core code reads no clock, so it is
        the Unix epoch when not given)."""
        parsed = parse_cadence(cadence, zone)
        window = check_jitter(jitter)
        _check_jitter_fits(window, parsed, now or _EPOCH)
        return cls(
            name=check_schedule_name(name),
            cadence=parsed.expression,
            zone=parsed.zone,
            task=check_name("task", task),
            payload=dict(payload or {}),
            queue=check_name("queue", queue),
            priority=priority,
            misfire=Misfire.parse(str(misfire), misfire_grace, catch_up),
            jitter=window,
        )


def check_jitter(value: timedelta | str | float | None) -> timedelta:
    if value is None:
        return timedelta(0)
    try:
        if isinstance(value, timedelta):
            window = value
        elif isinstance(value, str):
            window = parse_duration(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            window = timedelta(seconds=value) if math.isfinite(value) else timedelta(-1)
        else:
            raise InvalidSchedule(f"jitter must be a duration such as '30s', got {value!r}")
    except (InvalidDuration, OverflowError) as exc:
        raise InvalidSchedule(f"invalid jitter {value!r}: {exc}") from None
    if window < timedelta(0) or window > MAX_JITTER:
        raise InvalidSchedule(f"jitter must be between 0 and 1 day, got {value!r}")
    return window


def _check_jitter_fits(window: timedelta, cadence: Cadence, now: datetime) -> None:
    """A jitter as long as the time between two ticks could run a tick after the next one."""
    if not window:
        return
    gap = shortest_gap(cadence, now)
    if gap is not None and window >= gap:
        raise InvalidSchedule(
            f"jitter {format_duration(window)} must be shorter than the shortest interval "
            f"between two ticks of {cadence.expression!r}, {format_duration(gap)}"
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as stored, with its cursor and what it has done so far."""

    name: str
    cadence: str
    zone: str
    task: str
    payload: dict[str, Any]
    queue: str
    priority: int
    misfire: str
    misfire_grace: float
    catch_up: int | None
    jitter: float
    paused: bool
    origin: str
    tick_cursor: datetime
    next_tick: datetime | None
    fired: int
    late: int
    skipped: int
    coalesced: int
    lateness_total: float
    lateness_max: float
    last_fired: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def misfire_rule(self) -> Misfire:
        return Misfire.parse(self.misfire, timedelta(seconds=self.misfire_grace), self.catch_up)

    def parsed_cadence(self) -> Cadence:
        return parse_cadence(self.cadence, self.zone)

    @property
    def lateness_mean(self) -> float:
        return self.lateness_total / self.late if self.late else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cadence": self.cadence,
            "zone": self.zone,
            "task": self.task,
            "payload": self.payload,
            "queue": self.queue,
            "priority": self.priority,
            "misfire": self.misfire,
            "misfire_grace": self.misfire_grace,
            "catch_up": self.catch_up,
            "jitter": self.jitter,
            "paused": self.paused,
            "origin": self.origin,
            "tick_cursor": self.tick_cursor.isoformat(),
            "next_tick": self.next_tick.isoformat() if self.next_tick else None,
            "fired": self.fired,
            "late": self.late,
            "skipped": self.skipped,
            "coalesced": self.coalesced,
            "lateness_mean_seconds": self.lateness_mean,
            "lateness_max_seconds": self.lateness_max,
            "last_fired": self.last_fired.isoformat() if self.last_fired else None,
        }

    def describe_grace(self) -> str:
        return format_duration(timedelta(seconds=self.misfire_grace))


# Every field of a stored schedule: its definition, then the store's own.
SCHEDULE_FIELDS = tuple(field.name for field in fields(Schedule))
