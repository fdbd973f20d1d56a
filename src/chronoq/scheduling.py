"""Schedules and limits as the app declares them, turned into store parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

from chronoq.core.ratelimit import (
    KeyLimit,
    check_burst,
    check_concurrency,
    check_pattern,
    parse_rate,
)
from chronoq.core.schedules import ScheduleSpec
from chronoq.core.validate import check_name, encode_payload
from chronoq.storage.base import QueueLimitParams, ScheduleUpsertParams


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
