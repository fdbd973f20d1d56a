"""Turning stored rows into `Job` values, shared by the adapters."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from chronoq.core.jobs import Job, JobStatus, RescueResult, Stat


def job_from_row(row: Mapping[str, Any], to_time: Any = None) -> Job:
    """Build a Job from a row mapping; `to_time` converts the adapter's stored time values."""
    convert = to_time or _identity
    return Job(
        id=int(row["id"]),
        queue=row["queue"],
        task=row["task"],
        payload=_json_value(row["payload"]),
        status=JobStatus(row["status"]),
        priority=int(row["priority"]),
        run_at=convert(row["run_at"]),
        attempts=int(row["attempts"]),
        max_attempts=_optional_int(row["max_attempts"]),
        lease_seconds=float(row["lease_seconds"]),
        lease_token=int(row["lease_token"]),
        locked_until=convert(row["locked_until"]),
        worker_id=row["worker_id"],
        key=row["key"],
        errors=_json_value(row["errors"]),
        created_at=convert(row["created_at"]),
        started_at=convert(row["started_at"]),
        finished_at=convert(row["finished_at"]),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _identity(value: Any) -> Any:
    return value


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_RETRY_DELAY = 100 * 365 * 86400.0  # the longest delay enqueue accepts, too


def retry_delay(seconds: float) -> float:
    """A retry delay the database can add to its clock and read back.

    A handler may ask for any delay (`Retry(delay=...)`); an infinite one would fail the whole
    batch of results it travels in, and a huge one would store a time no reader can convert.
    NaN and negative delays mean "at once".
    """
    if not seconds > 0:
        return 0.0
    return min(float(seconds), MAX_RETRY_DELAY)


def micros_to_datetime(value: int | None) -> datetime | None:
    """Integer microseconds since the epoch as an aware UTC datetime, exactly.

    Integer arithmetic rather than `fromtimestamp(value / 1e6)`: a float holds too few digits
    for far-off dates (by the year 3000 the rounding error exceeds a microsecond).
    """
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=value)


def datetime_to_micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def rescue_result(rows: Iterable[Mapping[str, Any]]) -> RescueResult:
    """Split the (id, status) rows of a rescue into requeued and dead ids."""
    result = RescueResult()
    for row in rows:
        target = result.dead if row["status"] == JobStatus.DEAD else result.requeued
        target.append(row["id"])
    return result


def stats_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Stat]:
    return [Stat(row["queue"], JobStatus(row["status"]), int(row["count"])) for row in rows]
