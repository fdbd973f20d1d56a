"""Turning stored rows into `Job` values, shared by the adapters."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from chronoq.core.jobs import MAX_ID, Job, JobStatus, RescueResult, Stat, build_job
from chronoq.core.ratelimit import KeyLimit
from chronoq.core.schedules import (
    SCHEDULE_DEFINITION,
    SCHEDULE_FIELDS,
    SCHEDULE_TIMES,
    Schedule,
)
from chronoq.fleet.records import ProcessInfo, ProcessRecord, TaskInfo
from chronoq.storage.base import (
    LATENESS_BOUNDS,
    FinishedBucket,
    JobHeartbeatResult,
    JobInsertParams,
    LeaderTerm,
    Overview,
    OverviewParams,
    QueueCounts,
    QueueSettings,
    ScheduleAdvance,
    ScheduleUpsertParams,
)


def job_from_row(row: Mapping[str, Any], to_time: Any = None, from_json: Any = None) -> Job:
    """Build a Job from a row mapping; `to_time` converts the adapter's stored time values, and
    `from_json` its JSON columns when they arrive as text. (psycopg hands jsonb over decoded: a
    payload that is a JSON string arrives as a str, which must not be decoded a second time.)"""
    convert = to_time or _identity
    decode = from_json or _identity
    return build_job(
        id=int(row["id"]),
        queue=row["queue"],
        task=row["task"],
        payload=decode(row["payload"]),
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
        errors=decode(row["errors"]),
        created_at=convert(row["created_at"]),
        started_at=convert(row["started_at"]),
        finished_at=convert(row["finished_at"]),
        misfire=row["misfire"],
        misfire_grace=_optional_float(row["misfire_grace"]),
        rate_key=row["rate_key"],
        schedule=row["schedule"],
        tick=convert(row["tick"]),
        ticks=int(row["ticks"]),
        fence_rejections=int(row["fence_rejections"]),
        # Claims return only what a worker needs, without these: a claimed job has neither.
        output=_optional_json(_column(row, "output"), decode),
        progress=_optional_float(_column(row, "progress")),
        progress_note=_column(row, "progress_note"),
        trace_context=_optional_json(_column(row, "trace_context"), decode),
    )


def _column(row: Mapping[str, Any], name: str) -> Any:
    """A column the row may lack (None then): sqlite3.Row has no `get`."""
    try:
        return row[name]
    except (KeyError, IndexError):
        return None


JOB_FIELDS = tuple(field.name for field in dataclasses.fields(Job))
_STATUS_AT = JOB_FIELDS.index("status")
_STATUSES = {str(status): status for status in JobStatus}


def job_tuple_reader(columns: Sequence[str]) -> Callable[[Sequence[Any]], Job]:
    """A reader of `Job`s from tuple rows whose columns are named `columns` (a cursor's
    description), for an adapter whose values arrive already typed (psycopg in binary: ints,
    floats, aware datetimes, decoded JSON). The claim's hot path: one C-level pick of the
    fields in order per row instead of a dict and a conversion per column, about half the CPU
    of `job_from_row`."""
    pick = itemgetter(*(columns.index(name) for name in JOB_FIELDS))

    def read(row: Sequence[Any]) -> Job:
        values = list(pick(row))
        values[_STATUS_AT] = _STATUSES[values[_STATUS_AT]]
        return build_job(*values)

    return read


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimColumns:
    """Where the tuple rows of a claim (psycopg in binary) hold what its reader needs: each
    row is a claimed job's columns followed by the wake-up's, which every row repeats (a claim
    that got no job answers one row with the job's columns null)."""

    read: Callable[[Sequence[Any]], Job]
    id_at: int
    wakeup_at: tuple[int, int, int]  # the database's now, the next run_at, the next lease expiry
    limited_at: int

    @classmethod
    def of(cls, names: Sequence[str]) -> ClaimColumns:
        index = list(names).index
        return cls(
            job_tuple_reader(names),
            index("id"),
            (
                index("wakeup_db_now"),
                index("wakeup_next_run_at"),
                index("wakeup_next_lease_expiry"),
            ),
            index("wakeup_limited"),
        )


def _optional_json(value: Any, decode: Any) -> Any:
    return None if value is None else decode(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


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


def storable_id(job_id: int) -> bool:
    """Can `job_id` name a job? SQLite's driver refuses integers beyond 64 bits, and PostgreSQL
    would compare one as numeric, which no index on the id serves: answer without asking."""
    return 1 <= job_id <= MAX_ID


def storable_text(value: Any) -> Any:
    """`value` (an attempt's error: text, numbers, lists and objects) with every NUL and lone
    surrogate written as an escape. An exception's message may hold them, and PostgreSQL's
    jsonb refuses both, which would fail the whole batch of results the error travels in."""
    if isinstance(value, str):
        if value.isascii() and "\x00" not in value:
            return value
        escaped = value.replace("\x00", "\\x00").encode("utf-8", "backslashreplace")
        return escaped.decode("utf-8")
    if isinstance(value, dict):
        return {key: storable_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable_text(item) for item in value]
    return value


def micros_to_datetime(value: int | None) -> datetime | None:
    """Integer microseconds since the epoch as an aware UTC datetime, exactly.

    Integer arithmetic rather than `fromtimestamp(value / 1e6)`: a float holds too few digits
    for far-off dates (by the year 3000 the rounding error exceeds a microsecond).
    """
    if value is None:
        return None
    return _EPOCH + timedelta(0, 0, value)  # positional: keywords cost more than the sum


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


def heartbeat_result(rows: Iterable[Mapping[str, Any]]) -> JobHeartbeatResult:
    """Split the (id, status) rows of a heartbeat into renewed and cancelled ids."""
    result = JobHeartbeatResult()
    for row in rows:
        target = result.cancelled if row["status"] == JobStatus.CANCELLED else result.renewed
        target.add(row["id"])
    return result


def overview_since(db_now: datetime, params: OverviewParams) -> datetime | None:
    """Where the overview's read of finished jobs starts: `since`, else the start of the bucket
    the window begins in; None when there is no window to read."""
    if params.since is not None:
        return params.since
    if params.window <= 0:
        return None
    start = (db_now - timedelta(seconds=params.window)).timestamp()
    return datetime.fromtimestamp(math.floor(start / params.bucket) * params.bucket, UTC)


def overview_from_rows(
    db_now: datetime,
    queues: Iterable[Mapping[str, Any]],
    finished: Iterable[Mapping[str, Any]],
    to_time: Any = None,
) -> Overview:
    """The rows of the overview queries; `to_time` converts stored bucket starts. Finished
    rows come one per (queue, status, bucket, lateness bucket) and are folded per bucket."""
    convert = to_time or _identity
    folded: dict[tuple[str, str, Any], list[int]] = {}
    for row in finished:
        counts = folded.setdefault((row["queue"], row["status"], row["start"]), [0])
        counts[0] += int(row["count"])
        index = row["lateness_bucket"]
        if index is not None:
            if len(counts) == 1:
                counts.extend([0] * (len(LATENESS_BOUNDS) + 1))
            counts[1 + int(index)] += int(row["count"])
    return Overview(
        db_now=db_now,
        queues=[
            QueueCounts(
                queue=row["queue"],
                pending=int(row["pending"]),
                due=int(row["due"]),
                running=int(row["running"]),
                dead=int(row["dead"]),
                oldest_due_age=max(0.0, float(row["oldest_due_age"])),
            )
            for row in queues
        ],
        finished=sorted(
            (
                FinishedBucket(queue, JobStatus(status), convert(start), c[0], tuple(c[1:]))
                for (queue, status, start), c in folded.items()
            ),
            key=lambda b: (b.start, b.queue, b.status),
        ),
    )


def stats_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Stat]:
    return [Stat(row["queue"], JobStatus(row["status"]), int(row["count"])) for row in rows]


def queue_settings(row: Mapping[str, Any]) -> QueueSettings:
    limits = _json_value(row["key_limits"])
    return QueueSettings(
        name=row["name"],
        paused=bool(row["paused"]),
        rate=_optional_float(row["rate"]),
        burst=_optional_float(row["burst"]),
        concurrency=_optional_int(row["concurrency"]),
        key_limits=tuple(
            KeyLimit(limit["pattern"], float(limit["rate"]), float(limit["burst"]))
            for limit in limits
        ),
    )


def schedule_from_row(
    row: Mapping[str, Any], to_time: Any = None, from_json: Any = None
) -> Schedule:
    convert = to_time or _identity
    values = {name: row[name] for name in SCHEDULE_FIELDS}
    for name in SCHEDULE_TIMES:
        values[name] = convert(values[name])
    values["payload"] = (from_json or _identity)(values["payload"])
    values["paused"] = bool(values["paused"])  # SQLite stores 0 or 1
    return Schedule(**values)


def schedule_args(params: ScheduleUpsertParams) -> dict[str, Any]:
    """A definition as the `schedule_upsert` statement takes it (`SCHEDULE_DEFINITION`)."""
    args = {name: getattr(params, name) for name in SCHEDULE_DEFINITION if name != "payload"}
    args["payload"] = params.payload_json
    return args


def tick_args(job: JobInsertParams, from_time: Any = None) -> dict[str, Any]:
    """A schedule's tick job as the `job_insert_tick` statement takes it."""
    convert = from_time or _identity
    assert job.run_at is not None
    assert job.tick is not None
    return {
        "queue": job.queue,
        "task": job.task,
        "payload": job.payload_json,
        "priority": job.priority,
        "run_at": convert(job.run_at),
        "max_attempts": job.max_attempts,
        "lease_seconds": float(job.lease_seconds),
        "misfire": job.misfire,
        "misfire_grace": job.misfire_grace,
        "schedule": job.schedule,
        "tick": convert(job.tick),
        "ticks": job.ticks,
    }


def record_args(name: str, advance: ScheduleAdvance, from_time: Any = None) -> dict[str, Any]:
    convert = from_time or _identity
    assert advance.cursor is not None
    return {
        "name": name,
        "cursor": convert(advance.cursor),
        "next_tick": convert(advance.next_tick) if advance.next_tick is not None else None,
        "fired": advance.inserted,
        "late": advance.late,
        "skipped": advance.skipped,
        "coalesced": advance.coalesced,
        "lateness_total": advance.lateness_total,
        "lateness_max": advance.lateness_max,
    }


def leader_term(row: Mapping[str, Any], to_time: Any = None) -> LeaderTerm:
    convert = to_time or _identity
    return LeaderTerm(
        duty=row["duty"],
        holder=row["holder"],
        term=int(row["term"]),
        elected_at=convert(row["elected_at"]),
        renewed_at=convert(row["renewed_at"]),
        expires_at=convert(row["expires_at"]),
    )


def process_args(info: ProcessInfo) -> dict[str, Any]:
    """A process record's columns; lists and task settings travel as JSON text."""
    return {
        "id": info.id,
        "kind": info.kind,
        "host": info.host,
        "pid": info.pid,
        "version": info.version,
        "queues": json.dumps(list(info.queues)),
        "concurrency": info.concurrency,
        "tasks": json.dumps([task.to_json() for task in info.tasks]),
        "duties": json.dumps(list(info.duties)),
        "running": info.running,
    }


def process_record(
    row: Mapping[str, Any], to_time: Callable[[Any], datetime | None], to_list: Any
) -> ProcessRecord:
    """A stored process; `to_list` decodes the adapter's JSON columns."""
    started, seen, expires = (
        _required_time(to_time(row[name])) for name in ("started_at", "seen_at", "expires_at")
    )
    info = ProcessInfo(
        id=row["id"],
        kind=row["kind"],
        host=row["host"],
        pid=int(row["pid"]),
        version=row["version"],
        queues=tuple(str(queue) for queue in to_list(row["queues"])),
        concurrency=_optional_int(row["concurrency"]),
        tasks=tuple(TaskInfo.from_json(task) for task in to_list(row["tasks"])),
        running=int(row["running"]),
        duties=tuple(str(duty) for duty in to_list(row["duties"])),
    )
    return ProcessRecord(
        info=info,
        started_at=started,
        seen_at=seen,
        expires_at=expires,
        stopped_at=to_time(row["stopped_at"]),
        alive=bool(row["alive"]),
    )


def _required_time(value: datetime | None) -> datetime:
    if value is None:
        raise ValueError("a NOT NULL time column was read as NULL")
    return value
