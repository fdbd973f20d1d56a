"""Schedules and limits as the app declares them (`App.schedule`, `App.limit`,
`App.limit_keys`), turned into store parameters and stored by `App.sync` when a scheduler or a
worker starts.

`Declarations` is a part of `chronoq.App`, which supplies its store, config and tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

from chronoq.core.enqueue import JobSpec
from chronoq.core.ratelimit import (
    KeyLimit,
    check_burst,
    check_concurrency,
    check_pattern,
    parse_rate,
)
from chronoq.core.schedules import ScheduleSpec
from chronoq.core.validate import check_name, check_schedule_name, encode_payload
from chronoq.errors import ConfigError
from chronoq.storage.base import JobInsertParams, QueueLimitParams, ScheduleUpsertParams
from chronoq.task import Task

if TYPE_CHECKING:
    from chronoq.config import Config
    from chronoq.core.enqueue import Enqueued
    from chronoq.storage import JobStore
    from chronoq.task import ScheduleDecorator

log = logging.getLogger("chronoq.app")


@dataclass(slots=True)
class SyncReport:
    """What `App.sync` did to the stored schedules."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    undeclared: list[str] = field(default_factory=list)


def schedule_params(spec: ScheduleSpec, payload_limit: int, origin: str) -> ScheduleUpsertParams:
    return ScheduleUpsertParams(
        name=spec.name,
        cadence=spec.cadence,
        zone=spec.zone,
        task=spec.task,
        payload_json=encode_payload(spec.task, spec.payload, payload_limit),
        queue=spec.queue,
        priority=spec.priority,
        misfire=str(spec.misfire.policy),
        misfire_grace=spec.misfire.grace.total_seconds(),
        catch_up=spec.misfire.catch_up,
        jitter=spec.jitter.total_seconds(),
        origin=origin,
    )


def queue_limit_params(
    queue: str, rate: str | None, burst: float | None, concurrency: int | None
) -> QueueLimitParams:
    per_second = parse_rate(rate) if rate is not None else None
    return QueueLimitParams(
        name=check_name("queue", queue),
        rate=per_second,
        burst=check_burst(per_second, burst) if per_second is not None else None,
        concurrency=check_concurrency(concurrency),
    )


def key_limit(pattern: str, rate: str, burst: float | None) -> KeyLimit:
    per_second = parse_rate(rate)
    return KeyLimit(check_pattern(pattern), per_second, check_burst(per_second, burst))


class Declarations:
    """Schedules and limits declared in code, as a part of `App`."""

    config: Config
    schedules: dict[str, ScheduleSpec]
    limits: dict[str, QueueLimitParams]
    key_limits: dict[tuple[str, str], KeyLimit]

    if TYPE_CHECKING:

        @property
        def store(self) -> JobStore: ...

        def task(self, fn: Callable[..., Any], /) -> Task[Any, Any]: ...

        def prepare(self, spec: JobSpec) -> JobInsertParams: ...

        def enqueue_many(self, specs: Any, *, conn: Any = None) -> list[Enqueued]: ...

    @overload
    def schedule(
        self,
        cadence: str,
        task: str | Task[Any, Any],
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> ScheduleSpec: ...

    @overload
    def schedule(
        self,
        cadence: str,
        task: None = None,
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> ScheduleDecorator: ...

    def schedule(
        self,
        cadence: str,
        task: str | Task[Any, Any] | None = None,
        *,
        name: str | None = None,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> Any:
        """Declare a recurring schedule, stored when a scheduler starts (`App.sync`).

        `cadence` is a cron expression ("0 9 * * mon-fri") or an interval ("every 30s"),
        read in the IANA time zone `zone`. `misfire` says what happens to ticks the scheduler
        got to later than `misfire_grace`: "coalesce" (the default: one job for all of them,
        carrying their count), "run_late", "skip", or "catch_up" with `catch_up=N`. `jitter`
        spreads each tick's run over a window. Without `task`, it decorates a task or a function
        (registered as a task)::

            @app.schedule("0 9 * * *", zone="Europe/Paris")
            @app.task
            def digest() -> None: ...
        """

        def declare(target: str | Task[Any, Any] | Callable[..., Any]) -> Any:
            if not callable(target):
                target = check_name("task", target)  # refuses what is neither name nor function
            bound = target if isinstance(target, str | Task) else self.task(target)
            task_name = bound if isinstance(bound, str) else bound.name
            spec = self.schedule_spec(
                name=name or task_name,
                cadence=cadence,
                task=task_name,
                zone=zone,
                payload=payload,
                queue=queue,
                priority=priority,
                misfire=misfire,
                misfire_grace=misfire_grace,
                catch_up=catch_up,
                jitter=jitter,
            )
            if spec.name in self.schedules:
                raise ConfigError(f"schedule {spec.name!r} is declared twice")
            self.schedules[spec.name] = spec
            # As a decorator it gives back the task (a function is registered as one), so the
            # decorated name can still `defer` jobs; called with a task, the schedule.
            return bound if task is None else spec

        return declare(task) if task is not None else declare

    def schedule_spec(
        self,
        *,
        name: str,
        cadence: str,
        task: str,
        zone: str = "UTC",
        payload: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        misfire: str = "coalesce",
        misfire_grace: timedelta | float | str | None = None,
        catch_up: int | None = None,
        jitter: timedelta | float | str | None = None,
    ) -> ScheduleSpec:
        """Validate a schedule against this app: its task, payload, queue and timing."""
        check_schedule_name(name)  # before the task: a name no URL can reach is the first fault
        job = self.prepare(JobSpec(task, payload, queue=queue, priority=priority))
        return ScheduleSpec.build(
            name=name,
            cadence=cadence,
            task=task,
            queue=job.queue,
            payload=payload,
            zone=zone,
            priority=job.priority,
            misfire=misfire,
            misfire_grace=misfire_grace,
            catch_up=catch_up,
            jitter=jitter,
            now=datetime.now(UTC),
        )

    def add_schedule(self, spec: ScheduleSpec, *, origin: str = "cli") -> bool:
        """Store a schedule now (the CLI's `schedule add`); True when it is new."""
        return self.store.schedule_upsert(schedule_params(spec, self.config.payload_limit, origin))

    def limit(
        self,
        queue: str,
        *,
        rate: str | None = None,
        burst: float | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Declare a queue's limits, applied by every worker and scheduler at start: `rate`
        ("200/s", "5000/m") across all workers, as a token bucket of `burst` jobs (default:
        50 ms worth), and at most `concurrency` of its jobs running at once."""
        self.limits[queue] = queue_limit_params(queue, rate, burst, concurrency)

    def limit_keys(
        self, queue: str, pattern: str, *, rate: str, burst: float | None = None
    ) -> None:
        """Declare a rate for each `rate_key` of `queue`'s jobs matching the glob `pattern`
        ("customer:*"), each key with a bucket of its own."""
        self.key_limits[(check_name("queue", queue), pattern)] = key_limit(pattern, rate, burst)

    def sync(self) -> SyncReport:
        """Store the declared limits and schedules (what `chronoq scheduler` does at start)."""
        self.sync_limits()
        return self.sync_schedules()

    def sync_limits(self) -> None:
        """Store the declared queue and key limits (every worker does this at start)."""
        for limits in self.limits.values():
            self.store.queue_limit(limits)
        for (queue, _), limit in self.key_limits.items():
            self.store.key_limit_set(queue, limit)

    def sync_schedules(self) -> SyncReport:
        """Store the declared schedules. Each keeps its cursor, counters and pause; stored
        schedules once declared in code but not by this app are reported, not removed
        (another deployment may still declare them)."""
        report = SyncReport()
        for spec in self.schedules.values():
            params = schedule_params(spec, self.config.payload_limit, "code")
            created = self.store.schedule_upsert(params)
            (report.created if created else report.updated).append(spec.name)
        report.undeclared = [
            schedule.name
            for schedule in self.store.schedule_list()
            if schedule.origin == "code" and schedule.name not in self.schedules
        ]
        for name in report.undeclared:
            log.warning(
                "schedule %s was declared in code but is not declared by this app; it keeps "
                "firing until `chronoq schedule remove %s`",
                name,
                name,
                extra={"action": "app.sync", "schedule": name},
            )
        return report
