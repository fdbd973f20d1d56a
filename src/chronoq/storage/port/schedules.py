"""The schedules' part of the store port: recurring jobs and the cron enqueuer's passes.

Its statements are in each dialect's `schedules.sql`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from chronoq.core.schedules import Schedule
from chronoq.storage.port.jobs import JobInsertParams


@dataclass(frozen=True, slots=True)
class ScheduleUpsertParams:
    """A schedule's definition. An existing schedule keeps its cursor, counters and pause."""

    name: str
    cadence: str
    zone: str
    task: str
    payload_json: str
    queue: str
    priority: int
    misfire: str
    misfire_grace: float
    catch_up: int | None
    jitter: float
    origin: str = "cli"


@dataclass(frozen=True, slots=True)
class ScheduleDue:
    """Schedules with ticks to handle now, and when the next one falls due otherwise."""

    names: list[str]
    next_tick: datetime | None
    db_now: datetime


@dataclass(slots=True)
class ScheduleAdvance:
    """What one pass over a schedule decided: the tick jobs to insert (each with `schedule` and
    `tick` set, so a tick already fired is not inserted again), the new cursor and next tick,
    and the counters to add."""

    jobs: list[JobInsertParams] = field(default_factory=list)
    cursor: datetime | None = None
    next_tick: datetime | None = None
    late: int = 0
    skipped: int = 0
    coalesced: int = 0
    lateness_total: float = 0.0
    lateness_max: float = 0.0
    inserted: int = 0  # filled in by the store: tick jobs actually inserted


ScheduleDecision = Callable[[Schedule, datetime], ScheduleAdvance | None]


class SchedulesPort(Protocol):
    """Schedules and their advance, tick by tick."""

    def schedule_upsert(self, params: ScheduleUpsertParams) -> bool:
        """Create or update a schedule; True when it was created."""
        ...

    def schedule_get(self, name: str) -> Schedule | None: ...

    def schedule_list(self) -> list[Schedule]: ...

    def schedule_pause(self, name: str, paused: bool) -> Schedule | None:
        """Pause: its tick jobs not yet due are cancelled. Resume: the cursor moves to now,
        so ticks that fell in the pause are not treated as missed."""
        ...

    def schedule_remove(self, name: str) -> bool:
        """Delete the schedule and cancel its pending tick jobs."""
        ...

    def schedule_due(self, lookahead: timedelta) -> ScheduleDue: ...

    def schedule_advance(self, name: str, decide: ScheduleDecision) -> ScheduleAdvance | None:
        """Lock the schedule, let `decide` plan the pass on the database clock, then insert its
        jobs and store its cursor and counters, all in one transaction. None: the schedule is
        gone or paused, or `decide` had nothing to do."""
        ...
