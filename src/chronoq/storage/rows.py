"""Turning stored rows into `Job` values, shared by the adapters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from chronoq.core.jobs import Job, JobStatus


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
        max_attempts=int(row["max_attempts"]),
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


def _identity(value: Any) -> Any:
    return value


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def micros_to_datetime(value: int | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1_000_000, tz=UTC)


def datetime_to_micros(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
