"""The JSON API under `/api/v1`: enqueue, search, inspect and administer.

Every input error is a 4xx with one JSON body, `{"error": {"type", "message", "field"}}`, that
names the input at fault; the store is never asked to do anything with input that failed a
check, so a refusal leaves what is stored as it was. Endpoints are plain functions: FastAPI runs
them in its thread pool, where the store's blocking calls belong.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from chronoq.core.enqueue import RENAMED_OPTIONS, Enqueued, JobSpec
from chronoq.core.jobs import MAX_ID, Job, JobStatus, stats_json
from chronoq.core.schedules import Schedule
from chronoq.core.validate import check_schedule_name
from chronoq.errors import (
    ChronoqError,
    ConfigError,
    EnqueueError,
    InvalidDuration,
    InvalidPayload,
    JobNotFound,
    KeyConflict,
    NaiveDatetime,
    PayloadTooLarge,
    QueueNotEmpty,
    QueueNotFound,
    ScheduleNotFound,
    StoreUnavailable,
    UnknownQueue,
    UnknownTask,
)
from chronoq.fleet.view import fleet_json
from chronoq.http import fields
from chronoq.http.auth import Scope, authentication_failed, throttled_for
from chronoq.http.context import HttpContext
from chronoq.http.fields import FieldError
from chronoq.http.models import (
    BatchIn,
    BatchOut,
    DeadSelection,
    EnqueuedOut,
    ErrorOut,
    JobIn,
    JobOut,
    JobPage,
    ProcessesOut,
    PurgeIn,
    PurgeOut,
    QueueChangeIn,
    QueueOut,
    QueueRemovedOut,
    RequeueOut,
    ScheduleOut,
    StatsOut,
)
from chronoq.http.views import read_overview
from chronoq.observability.recent import RecentFinished
from chronoq.queues import queue_to_change, remove_queue
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    JobInsertParams,
    JobListParams,
    OverviewParams,
    ProcessListParams,
)
from chronoq.storage.dsn import redact

MAX_PAGE = 1000
STORE_UNAVAILABLE = "database unavailable"
log = logging.getLogger("chronoq.http")
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 429)
}
_bearer = HTTPBearer(auto_error=False, description="A read or admin token.")


class ApiError(Exception):
    """An error response: status, kind, message and the input at fault."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        field: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.field = status, kind, message, field
        self.headers = dict(headers or {})


# -- auth -----------------------------------------------------------------------------------


def _requires(ctx: HttpContext, needed: Scope) -> Callable[..., None]:
    def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if not ctx.tokens.open:
            _not_throttled(request)
        scope = ctx.tokens.scope_of(credentials.credentials if credentials else None)
        if scope is None:
            kind = "Unauthorized" if credentials is None else "InvalidToken"
            authentication_failed(
                request, "no bearer token" if credentials is None else "unknown token"
            )
            raise ApiError(401, kind, "a valid bearer token is required")
        if scope < needed:
            raise ApiError(403, "Forbidden", "this endpoint needs an admin token")

    return check


def _not_throttled(request: Request) -> None:
    """Refuse, without looking at its token, a client that failed too often of late."""
    wait = throttled_for(request)
    if wait is not None:
        message = (
            "too many failed authentications from this address; "
            f"retry in {wait} s (no token is checked until then)"
        )
        raise ApiError(429, "TooManyRequests", message, headers={"Retry-After": str(wait)})


# -- the routes -----------------------------------------------------------------------------


def api_routes(ctx: HttpContext) -> APIRouter:
    reader = APIRouter(dependencies=[Depends(_requires(ctx, Scope.READ))], responses=ERRORS)
    admin = APIRouter(dependencies=[Depends(_requires(ctx, Scope.ADMIN))], responses=ERRORS)
    _job_routes(ctx, reader, admin)
    _dead_routes(ctx, reader, admin)
    _schedule_routes(ctx, reader, admin)
    _queue_routes(ctx, reader, admin)
    _process_routes(ctx, reader)
    router = APIRouter()
    router.include_router(reader)
    router.include_router(admin)
    return router


Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Jobs per page.")]
Cursor = Annotated[str | None, Query(description="`next_cursor` of the previous page.")]
Filter = Annotated[str | None, Query()]
Name = Annotated[str, Path(min_length=1, max_length=200)]


def _job_routes(ctx: HttpContext, reader: APIRouter, admin: APIRouter) -> None:
    @admin.post("/jobs", status_code=201, response_model=EnqueuedOut, tags=["jobs"])
    def enqueue(job: JobIn, response: Response) -> dict[str, Any]:
        """Enqueue one job. 201 when created; 200 with `created: false` when a live job
        already holds its key."""
        [result] = _enqueue(ctx, [job])
        if not result.created:
            response.status_code = 200
        return {"id": result.id, "created": result.created}

    @admin.post("/jobs/batch", status_code=201, response_model=BatchOut, tags=["jobs"])
    def enqueue_batch(batch: BatchIn) -> dict[str, Any]:
        """Enqueue jobs in one transaction: one refused job refuses them all."""
        results = _enqueue(ctx, batch.jobs)
        return {"results": [{"id": r.id, "created": r.created} for r in results]}

    @reader.get("/jobs", response_model=JobPage, tags=["jobs"])
    def search_jobs(
        status: Annotated[list[JobStatus] | None, Query()] = None,
        queue: Filter = None,
        task: Filter = None,
        key: Filter = None,
        created_after: Annotated[datetime | None, Query()] = None,
        created_before: Annotated[datetime | None, Query()] = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Jobs newest first, filtered; `created_after` is inclusive, `created_before` not."""
        params = JobListParams(
            statuses=tuple(status or ()),
            queue=fields.name_filter("queue", queue),
            task=fields.name_filter("task", task),
            key=fields.key_filter(key),
            created_after=fields.aware_instant("created_after", created_after),
            created_before=fields.aware_instant("created_before", created_before),
            limit=limit,
            before_id=_cursor(cursor),
        )
        return _page(ctx.app.store.job_list(params), limit)

    @reader.get("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def get_job(job_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> dict[str, Any]:
        return _job_or_404(ctx.app.store.job_get(job_id), job_id).to_json()

    @admin.post("/jobs/{job_id}/cancel", response_model=JobOut, tags=["jobs"])
    def cancel_job(job_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> dict[str, Any]:
        """Cancel a pending or running job (409 when it has already ended)."""
        before = _job_or_404(ctx.app.store.job_get(job_id), job_id)
        job = (
            _job_or_404(ctx.app.store.job_cancel(job_id), job_id)
            if not before.status.is_final
            else before
        )
        if before.status.is_final or job.status != JobStatus.CANCELLED:
            raise ApiError(409, "JobFinished", f"job {job_id} is {job.status}; not cancelled")
        return job.to_json()

    @reader.get("/stats", response_model=StatsOut, tags=["queues"])
    def stats() -> dict[str, Any]:
        """Jobs per queue and status, and in total: the document `chronoq stats --json` prints."""
        return stats_json(ctx.app.store.stats())

    @reader.get("/overview", tags=["queues"])
    def overview(
        window: Annotated[float, Query(ge=10, le=86_400)] = 300.0,
        bucket: Annotated[float, Query(ge=1, le=3_600)] = 10.0,
    ) -> dict[str, Any]:
        """What the dashboard shows: per-queue counts, rates and lateness, a throughput series
        and a lateness histogram over the last `window` seconds."""
        if window / bucket > 1000:
            raise ApiError(422, "ValidationError", "window / bucket must be at most 1000", "bucket")
        shared = ctx.recent
        if (window, bucket) != (shared.window, shared.bucket):
            shared = RecentFinished(window, bucket)  # read whole: only the default is kept
        return read_overview(shared, ctx.app.store)


def _dead_routes(ctx: HttpContext, reader: APIRouter, admin: APIRouter) -> None:
    @reader.get("/dead", response_model=JobPage, tags=["dead letters"])
    def list_dead(
        queue: Filter = None, task: Filter = None, limit: Limit = 100, cursor: Cursor = None
    ) -> dict[str, Any]:
        params = JobListParams(
            statuses=(JobStatus.DEAD,),
            queue=fields.name_filter("queue", queue),
            task=fields.name_filter("task", task),
            limit=limit,
            before_id=_cursor(cursor),
        )
        return _page(ctx.app.store.job_list(params), limit)

    @admin.post("/dead/requeue", response_model=RequeueOut, tags=["dead letters"])
    def requeue_dead(selection: DeadSelection) -> dict[str, Any]:
        """Requeue dead jobs: they start over with all their attempts."""
        _check_selection(selection)
        result = ctx.app.store.dead_requeue(
            DeadRequeueParams(
                ids=None if selection.all else selection.ids,
                queue=fields.name_filter("queue", selection.queue),
                task=fields.name_filter("task", selection.task),
            )
        )
        return {
            "requeued": result.requeued,
            "key_conflicts": result.key_conflicts,
            "not_dead": result.not_dead,
            "not_found": result.not_found,
        }

    @admin.post("/dead/purge", response_model=PurgeOut, tags=["dead letters"])
    def purge_dead(selection: PurgeIn) -> dict[str, Any]:
        """Delete dead jobs for good."""
        _check_selection(selection)
        purged = ctx.app.store.dead_purge(
            DeadPurgeParams(
                older_than=fields.duration("older_than", selection.older_than),
                ids=None if selection.all else selection.ids,
                queue=fields.name_filter("queue", selection.queue),
                task=fields.name_filter("task", selection.task),
            )
        )
        return {"purged": purged}


def _schedule_routes(ctx: HttpContext, reader: APIRouter, admin: APIRouter) -> None:
    @reader.get("/schedules", response_model=list[ScheduleOut], tags=["schedules"])
    def list_schedules() -> list[dict[str, Any]]:
        return [s.to_json() for s in ctx.app.store.schedule_list()]

    @reader.get("/schedules/{name}", response_model=ScheduleOut, tags=["schedules"])
    def get_schedule(name: Name) -> dict[str, Any]:
        schedule = ctx.app.store.schedule_get(_named("schedule", name))
        return _schedule_or_404(schedule, name).to_json()

    @admin.post("/schedules/{name}/pause", response_model=ScheduleOut, tags=["schedules"])
    def pause_schedule(name: Name) -> dict[str, Any]:
        """Pause: its tick jobs not yet due are cancelled."""
        schedule = ctx.app.store.schedule_pause(_named("schedule", name), True)
        return _schedule_or_404(schedule, name).to_json()

    @admin.post("/schedules/{name}/resume", response_model=ScheduleOut, tags=["schedules"])
    def resume_schedule(name: Name) -> dict[str, Any]:
        """Resume from now: ticks that fell in the pause are not missed ticks."""
        schedule = ctx.app.store.schedule_pause(_named("schedule", name), False)
        return _schedule_or_404(schedule, name).to_json()

    @admin.post(
        "/schedules/{name}/trigger", status_code=201, response_model=EnqueuedOut, tags=["schedules"]
    )
    def trigger_schedule(name: Name) -> dict[str, Any]:
        """Enqueue the schedule's job now, outside its cadence; its cursor does not move."""
        result = ctx.app.trigger_schedule(_named("schedule", name))
        return {"id": result.id, "created": result.created}


def _queue_routes(ctx: HttpContext, reader: APIRouter, admin: APIRouter) -> None:
    @reader.get("/queues", response_model=list[QueueOut], tags=["queues"])
    def list_queues() -> list[dict[str, Any]]:
        """Every queue with jobs or settings: its settings and its counts now."""
        return _queues(ctx)

    @admin.post("/queues/{name}/pause", response_model=QueueOut, tags=["queues"])
    def pause_queue(name: Name, change: QueueChangeIn | None = None) -> dict[str, Any]:
        """Pause a known queue; 404 for a name nobody uses, unless `create` is true."""
        create = change is not None and change.create
        ctx.app.store.queue_pause(
            queue_to_change(ctx.app, _named("queue", name), create=create), True
        )
        return _queue(ctx, name)

    @admin.post("/queues/{name}/resume", response_model=QueueOut, tags=["queues"])
    def resume_queue(name: Name) -> dict[str, Any]:
        ctx.app.store.queue_pause(queue_to_change(ctx.app, _named("queue", name)), False)
        return _queue(ctx, name)

    @admin.delete("/queues/{name}", response_model=QueueRemovedOut, tags=["queues"])
    def remove_queue_settings(name: Name) -> dict[str, Any]:
        """Delete an idle queue's stored settings, so it is no longer listed; 409 (naming the
        counts) while it has pending or running jobs, 404 for a queue nobody knows."""
        removal = remove_queue(ctx.app, _named("queue", name))
        return {"name": removal.name, "removed": removal.removed}


def _process_routes(ctx: HttpContext, reader: APIRouter) -> None:
    @reader.get("/processes", response_model=ProcessesOut, tags=["processes"])
    def list_processes(
        include_all: Annotated[
            bool,
            Query(
                alias="all", description="Also those that ended in the last day, with their state."
            ),
        ] = False,
    ) -> dict[str, Any]:
        """The fleet registry: live workers, schedulers and servers, live ones first; the
        document `chronoq processes --json` prints."""
        return fleet_json(ctx.app.store.process_list(ProcessListParams(all=include_all)))


# -- helpers --------------------------------------------------------------------------------


def _enqueue(ctx: HttpContext, jobs: Sequence[JobIn]) -> list[Enqueued]:
    """Prepare every job, naming the one at fault in a refusal, then store them all."""
    prepared = [
        _prepared(ctx, job, "" if len(jobs) == 1 else f"jobs[{n}].") for n, job in enumerate(jobs)
    ]
    return ctx.app.enqueue_prepared(prepared)


def _prepared(ctx: HttpContext, job: JobIn, where: str) -> JobInsertParams:
    try:
        return ctx.app.prepare(_spec(job))
    except ChronoqError as exc:
        raise _input_error(exc, where) from None


def _spec(job: JobIn) -> JobSpec:
    return JobSpec(
        task=job.task,
        payload=job.payload,
        run_at=job.run_at,
        delay=job.delay,
        queue=job.queue,
        key=job.key,
        priority=job.priority,
        max_attempts=job.max_attempts,
        misfire=job.misfire,
        misfire_grace=job.misfire_grace,
        rate_key=job.rate_key,
        unique_for=job.unique_for,
    )


_FIELD_OF_ERROR: tuple[tuple[type[ChronoqError], str], ...] = (
    (UnknownTask, "task"),
    (UnknownQueue, "queue"),
    (NaiveDatetime, "run_at"),
    (InvalidPayload, "payload"),
    (PayloadTooLarge, "payload"),
)
_FIELDS = (
    "unique_for",
    "misfire_grace",
    "max_attempts",
    "rate_key",
    "priority",
    "misfire",
    "payload",
    "queue",
    "delay",
    "task",
    "key",
    "run_at",
)


def _input_error(exc: ChronoqError, where: str) -> ApiError:
    status = 413 if isinstance(exc, PayloadTooLarge) else 422
    field = next((f for kind, f in _FIELD_OF_ERROR if isinstance(exc, kind)), None)
    if field is None:
        text = str(exc)
        field = next((f for f in _FIELDS if _names(text, f)), None)
        if field is None and isinstance(exc, InvalidDuration):
            field = "delay"
    return ApiError(status, type(exc).__name__, str(exc), f"{where}{field}" if field else None)


def _names(message: str, field: str) -> bool:
    """Does an error message start by naming `field` (as `misfire_grace` or "misfire grace")?"""
    spoken = field.replace("_", " ")
    return message.startswith((field, spoken)) or f"`{field}`" in message


def _page(jobs: list[Job], limit: int) -> dict[str, Any]:
    cursor = str(jobs[-1].id) if len(jobs) == limit else None
    return {"jobs": [job.to_json() for job in jobs], "next_cursor": cursor}


def _cursor(cursor: str | None) -> int | None:
    return fields.job_id("cursor", cursor) if cursor is not None else None


def _named(kind: str, value: str) -> str:
    """A name in the path (FastAPI has checked that it is not empty)."""
    return fields.name(kind, value)


def _check_selection(selection: DeadSelection) -> None:
    if selection.all == (selection.ids is not None):
        message = "give either `ids` or `all: true` (with `queue` or `task` to narrow it)"
        raise ApiError(422, "ValidationError", message, "ids")


def _job_or_404(job: Job | None, job_id: int) -> Job:
    if job is None:
        raise ApiError(404, JobNotFound.__name__, f"no job with id {job_id}", "job_id")
    return job


def _schedule_or_404(schedule: Schedule | None, name: str) -> Schedule:
    if schedule is None:
        raise ApiError(404, ScheduleNotFound.__name__, f"no schedule named {name!r}", "name")
    return schedule


def _queues(ctx: HttpContext) -> list[dict[str, Any]]:
    settings = {q.name: q for q in ctx.app.store.queue_list()}
    # A window of nothing: the counts now, without reading any finished job.
    overview = ctx.app.store.overview(OverviewParams(window=0.0))
    counts = {q.queue: q for q in overview.queues}
    rows = []
    for name in sorted(settings.keys() | counts.keys()):
        rows.append(_queue_row(name, settings.get(name), counts.get(name)))
    return rows


def _queue(ctx: HttpContext, name: str) -> dict[str, Any]:
    return next(q for q in _queues(ctx) if q["name"] == name)


def _queue_row(name: str, settings: Any, counts: Any) -> dict[str, Any]:
    return {
        "name": name,
        "paused": bool(settings and settings.paused),
        "rate": settings.rate if settings else None,
        "burst": settings.burst if settings else None,
        "concurrency": settings.concurrency if settings else None,
        "key_limits": [
            {"pattern": k.pattern, "rate": k.rate, "burst": k.burst}
            for k in (settings.key_limits if settings else ())
        ],
        "pending": counts.pending if counts else 0,
        "due": counts.due if counts else 0,
        "running": counts.running if counts else 0,
        "dead": counts.dead if counts else 0,
        "oldest_due_age": counts.oldest_due_age if counts else 0.0,
    }


# -- errors ---------------------------------------------------------------------------------


def install_error_handlers(server: FastAPI) -> None:
    server.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    server.add_exception_handler(FieldError, _field_error)  # type: ignore[arg-type]
    server.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    server.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    server.add_exception_handler(ChronoqError, _chronoq_error)  # type: ignore[arg-type]


def error_response(status: int, kind: str, message: str, field: str | None) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, "field": field}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    response = error_response(exc.status, exc.kind, exc.message, exc.field)
    response.headers.update(exc.headers)
    return response


def _field_error(request: Request, exc: FieldError) -> JSONResponse:
    """A value read by `fields` that cannot be used: always the caller's to fix."""
    return error_response(422, exc.kind, exc.message, exc.field)


def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors, reduced to the first one, its field named as a path
    (`jobs[2].at`); the body keeps the others too."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    field = _location(first.get("loc", ()))
    if first.get("type") == "timezone_aware" and field:
        # The error the Python API and the CLI raise for the same mistake, with its message.
        return error_response(422, "NaiveDatetime", fields.naive_message(field), field)
    if first.get("type") == "json_invalid":
        return error_response(422, "MalformedJSON", _json_syntax(first), BODY)
    kind = "ValidationError"
    said = _renamed(first) if request.url.path.endswith(_JOB_BODIES) else None
    message = f"{field}: {said or first.get('msg', 'invalid')}" if field else str(first.get("msg"))
    response = error_response(422, kind, message, field)
    return response


_JOB_BODIES = ("/jobs", "/jobs/batch")  # the requests whose bodies hold JobIn fields
BODY = "body"  # the field of an error in the body as a whole: it is not JSON the API can read


def _json_syntax(error: Mapping[str, Any]) -> str:
    """FastAPI's "JSON decode error" at a character offset, as the decoder's own reason."""
    loc = error.get("loc") or ()
    reason = (error.get("ctx") or {}).get("error") or "it cannot be parsed"
    where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    return f"the body is not valid JSON: {reason}{where}"


def _renamed(error: Mapping[str, Any]) -> str | None:
    """For a field refused because it was renamed, the sentence that gives its new name."""
    loc = error.get("loc") or ("",)
    new = RENAMED_OPTIONS.get(loc[-1]) if error.get("type") == "extra_forbidden" else None
    return f"`{loc[-1]}` is now called `{new}`" if new else None


_WHERE = frozenset({"body", "query", "path", "header"})
# Names pydantic gives the members of a union (`float | str`): they are not fields.
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _location(loc: Sequence[Any]) -> str | None:
    parts = []
    for part in loc:
        if isinstance(part, str) and (not part.isidentifier() or part in _UNION_TAGS):
            break
        if part not in _WHERE:
            parts.append(part)
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    unparsable = _unparsable_json(exc)
    if unparsable:
        return error_response(422, "MalformedJSON", unparsable, BODY)
    if exc.status_code == 404 and (refused := _slashed_schedule_name(request)):
        return error_response(422, "ValidationError", refused, "name")
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    return error_response(exc.status_code, kind, str(exc.detail), None)


# /schedules/NAME[/action] as sent, before the server decoded %2F into a '/' no route matches.
_SLASHED_SCHEDULE = re.compile(
    r"/api/v1/schedules/([^/]*%2F[^/]*)(?:/(?:pause|resume|trigger))?", re.IGNORECASE
)


def _slashed_schedule_name(request: Request) -> str | None:
    """Why a schedule path whose name holds an encoded '/' found no route: such names are
    refused (`check_schedule_name`), so say that rather than 'not found'."""
    raw = request.scope.get("raw_path") or b""
    match = _SLASHED_SCHEDULE.fullmatch(raw.decode("latin-1"))
    if match is None:
        return None
    try:
        check_schedule_name(unquote(match[1]))
    except ConfigError as exc:
        return str(exc)
    return None


def log_store_unavailable(request: Request, exc: StoreUnavailable) -> None:
    """The store's own words, for the operator: they name the database's user, host, port and
    name, which are no business of a client's. The store shows its DSN masked already; masked
    again here in case a driver's message quotes one of its own."""
    log.warning(
        "%s %s: the store is unavailable: %s",
        request.method,
        request.url.path,
        redact(str(exc)),
        extra={"action": "http.store_unavailable"},
    )


def store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
    log_store_unavailable(request, exc)
    return error_response(503, type(exc).__name__, STORE_UNAVAILABLE, None)


def _unparsable_json(exc: StarletteHTTPException) -> str | None:
    """Why a body FastAPI could not parse is malformed JSON, when it is: FastAPI answers 400 to
    every error of the decoder but a syntax error, and three of those are the caller's: bytes
    that are not UTF-8, and JSON valid in grammar but past what Python's decoder takes (its
    recursion limit and its limit on the digits of an integer)."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        bad = cause.object[cause.start : cause.start + 1].hex()
        return f"the body is not valid JSON: byte 0x{bad} at byte {cause.start} is not UTF-8"
    if isinstance(cause, RecursionError):
        return "the JSON body is nested too deep"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return (
            f"the JSON body holds a number too long: at most {sys.get_int_max_str_digits()} digits"
        )
    return None


def _chronoq_error(request: Request, exc: ChronoqError) -> JSONResponse:
    """Errors the store or the app raised past every check: a conflict, a missing schedule,
    a database that cannot be reached."""
    if isinstance(exc, ScheduleNotFound | QueueNotFound):
        return error_response(404, type(exc).__name__, str(exc), "name")
    if isinstance(exc, QueueNotEmpty):
        return error_response(409, type(exc).__name__, str(exc), "name")
    if isinstance(exc, KeyConflict):
        return error_response(409, type(exc).__name__, str(exc), "key")
    if isinstance(exc, StoreUnavailable):
        return store_unavailable(request, exc)
    if isinstance(exc, EnqueueError | ConfigError | InvalidDuration):
        api = _input_error(exc, "")
        return error_response(api.status, api.kind, api.message, api.field)
    return error_response(500, type(exc).__name__, str(exc), None)
