"""The leader-only services: cron enqueuer, lease rescuer, pruner.

Each is a small `Service`: `run_once()` does one pass and returns how long until it wants to
run again. Only the elected leader runs them (see `chronoq.scheduler.runner`); each pass is also
safe if two leaders overlap for a moment, so a split brain costs work, never a double fire.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from chronoq.core.cron import jitter_offset
from chronoq.core.misfire import MisfirePolicy, resolve
from chronoq.core.schedules import Schedule
from chronoq.core.validate import encode_payload
from chronoq.errors import ChronoqError
from chronoq.observability.eventlog import EventLog
from chronoq.observability.events import JobsPruned, LeasesRescued, Observers, TicksFired
from chronoq.storage.base import (
    JobInsertParams,
    JobPruneParams,
    JobRescueParams,
    ScheduleAdvance,
)

if TYPE_CHECKING:
    from chronoq.runtime import Runtime

log = logging.getLogger("chronoq.scheduler")


class Service:
    """One leader-only duty. `interval` is the longest it waits between passes."""

    name = "service"
    interval = 60.0

    def run_once(self) -> float:
        """One pass; returns the seconds until the next (at most `interval`)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class CronOptions:
    # Ticks are enqueued this far ahead of their time, so they run on time even across a
    # failover shorter than this, and a worker's timer, not the scheduler's, starts them.
    lookahead: timedelta = timedelta(seconds=5)
    interval: float = 1.0


class CronEnqueuer(Service):
    """Turns schedule ticks into jobs, each keyed by (schedule, tick); each pass over a
    schedule is a `TicksFired` event to `events`."""

    name = "cron"

    def __init__(
        self, runtime: Runtime, options: CronOptions | None = None, events: Observers | None = None
    ) -> None:
        self.runtime = runtime
        self.options = options or CronOptions()
        self.events = events if events is not None else _logged(runtime)
        self.interval = self.options.interval
        self.fired = 0

    def run_once(self) -> float:
        store = self.runtime.store
        due = store.schedule_due(self.options.lookahead)
        if due.names:
            for name in due.names:
                self._advance(name)
            # A pass handles a bounded number of ticks: what is left is due again at once.
            due = store.schedule_due(self.options.lookahead)
            if due.names:
                return 0.0
        return self._until_next(due.next_tick, due.db_now)

    def _advance(self, name: str) -> None:
        try:
            advance = self.runtime.store.schedule_advance(name, self._decide)
        except ChronoqError as exc:
            log.error(
                "schedule %s: pass failed: %s",
                name,
                exc,
                extra={"action": "scheduler.cron", "schedule": name},
            )
            return
        if advance is not None:
            self.fired += advance.inserted
            self.events.emit(TicksFired(name, advance))

    def _until_next(self, next_tick: datetime | None, now: datetime) -> float:
        if next_tick is None:
            return self.interval
        wait = (next_tick - self.options.lookahead - now).total_seconds()
        return min(self.interval, max(0.0, wait))

    def _decide(self, schedule: Schedule, now: datetime) -> ScheduleAdvance | None:
        cadence = schedule.parsed_cadence()
        misfire = schedule.misfire_rule
        resolution = resolve(cadence, schedule.tick_cursor, now, self.options.lookahead, misfire)
        advance = ScheduleAdvance(
            cursor=resolution.cursor,
            next_tick=cadence.next_after(resolution.cursor),
            skipped=resolution.skipped,
            coalesced=resolution.coalesced,
        )
        for fire in resolution.fires:
            advance.jobs.append(self._job(schedule, fire.tick, fire.ticks))
            late = fire.late.total_seconds()
            if late > 0:
                advance.late += 1
                advance.lateness_total += late
                advance.lateness_max = max(advance.lateness_max, late)
        return advance

    def _job(self, schedule: Schedule, tick: datetime, ticks: int) -> JobInsertParams:
        task = self.runtime.tasks.get(schedule.task)
        skip = schedule.misfire == MisfirePolicy.SKIP
        window = timedelta(seconds=schedule.jitter)
        return JobInsertParams(
            queue=schedule.queue,
            task=schedule.task,
            payload_json=encode_payload(
                schedule.task, schedule.payload, self.runtime.config.payload_limit
            ),
            run_at=tick + jitter_offset(schedule.name, tick, window),
            priority=schedule.priority,
            max_attempts=task.max_attempts if task is not None else None,
            lease_seconds=task.lease if task is not None else self.runtime.config.default_lease,
            # A tick of a "skip" schedule that waits in the queue past its grace is skipped
            # too; the other policies run a fired tick however late a worker gets to it.
            misfire=MisfirePolicy.SKIP if skip else MisfirePolicy.RUN_LATE,
            misfire_grace=schedule.misfire_grace if skip else None,
            schedule=schedule.name,
            tick=tick,
            ticks=ticks,
        )


class LeaseRescuer(Service):
    """Puts jobs whose lease expired back to pending (or dead on their last attempt). The
    scheduler runs it as a service; a worker in db dispatch runs it before its claims too."""

    name = "rescuer"

    def __init__(
        self,
        runtime: Runtime,
        interval: float = 5.0,
        events: Observers | None = None,
        *,
        by: str = "scheduler",
    ) -> None:
        self.runtime = runtime
        self.interval = interval
        self.events = events if events is not None else _logged(runtime)
        self.by = by

    def run_once(self) -> float:
        self.rescue()
        return self.interval

    def rescue(self) -> int:
        """One pass; how many jobs it put back or killed."""
        result = self.runtime.store.job_rescue_expired(JobRescueParams())
        count = len(result.requeued) + len(result.dead)
        if count:
            self.events.emit(LeasesRescued(self.by, result.requeued, result.dead))
        return count


class Pruner(Service):
    """Deletes finished jobs older than the retention, in batches."""

    name = "pruner"

    def __init__(
        self,
        runtime: Runtime,
        retention: timedelta,
        interval: float = 60.0,
        events: Observers | None = None,
    ) -> None:
        self.runtime = runtime
        self.retention = retention
        self.interval = interval
        self.events = events if events is not None else _logged(runtime)

    def run_once(self) -> float:
        params = JobPruneParams(older_than=self.retention)
        deleted = self.runtime.store.job_prune(params)
        if deleted:
            self.events.emit(JobsPruned(deleted, str(self.retention)))
        # A full batch means more is left: come back at once rather than in an interval.
        return 0.0 if deleted >= params.limit else self.interval


def _logged(runtime: Runtime) -> Observers:
    """The events of a service run on its own: logged, and told to the app's observers."""
    return Observers([EventLog()], runtime.observers)
