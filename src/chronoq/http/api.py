"""The JSON API under `/api/v1`: enqueue, search, inspect and administer.

Every input error is a 4xx with one JSON body, `{"error": {"type", "message", "field"}}`, that
names the input at fault (`chronoq.http.errors` makes it); the store is never asked to do
anything with input that failed a check, so a refusal leaves what is stored as it was. A route
parses its input, calls the app (the admin API, `app.admin`, for everything but enqueues) and
returns what it answered; the admin's errors (not found, conflict) become their status codes in
one handler. Endpoints are plain functions: FastAPI runs them in its thread pool, where the
store's blocking calls belong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from chronoq.admin import QueueState
from chronoq.core.enqueue import Enqueued, JobSpec
from chronoq.core.jobs import MAX_ID, Job, JobStatus, stats_json
from chronoq.errors import ChronoqError
from chronoq.fleet.view import fleet_json
from chronoq.http import fields
from chronoq.http.auth import Scope, authentication_failed, throttled_for
from chronoq.http.context import HttpContext
from chronoq.http.errors import ApiError, input_error
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
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    JobInsertParams,
    JobListParams,
)

MAX_PAGE = 1000
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 429)
}
_bearer = HTTPBearer(auto_error=False, description="A read or admin token.")


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
JobId = Annotated[int, Path(ge=1, le=MAX_ID)]


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
        return _page(ctx.app.admin.list_jobs(params), limit)

    @reader.get("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def get_job(job_id: JobId) -> dict[str, Any]:
        return ctx.app.admin.get_job(job_id).to_json()

    @admin.post("/jobs/{job_id}/cancel", response_model=JobOut, tags=["jobs"])
    def cancel_job(job_id: JobId) -> dict[str, Any]:
        """Cancel a pending or running job (409 when it has already ended)."""
        return ctx.app.admin.cancel_job(job_id).to_json()

    @reader.get("/stats", response_model=StatsOut, tags=["queues"])
    def stats() -> dict[str, Any]:
        """Jobs per queue and status, and in total: the document `chronoq stats --json` prints."""
        return stats_json(ctx.app.admin.stats())

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
            queue=fields.name_filter("queue", queue),
            task=fields.name_filter("task", task),
            limit=limit,
            before_id=_cursor(cursor),
        )
        return _page(ctx.app.admin.list_dead(params), limit)

    @admin.post("/dead/requeue", response_model=RequeueOut, tags=["dead letters"])
    def requeue_dead(selection: DeadSelection) -> dict[str, Any]:
        """Requeue dead jobs: they start over with all their attempts."""
        _check_selection(selection)
        result = ctx.app.admin.requeue_dead(
            DeadRequeueParams(
                ids=None if selection.all else selection.ids,
                queue=fields.name_filter("queue", selection.queue),
                task=fields.name_filter("task", selection.task),
            )
        )
        return dataclasses.asdict(result)

    @admin.post("/dead/purge", response_model=PurgeOut, tags=["dead letters"])
    def purge_dead(selection: PurgeIn) -> dict[str, Any]:
        """Delete dead jobs for good."""
        _check_selection(selection)
        purged = ctx.app.admin.purge_dead(
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
        return [s.to_json() for s in ctx.app.admin.list_schedules()]

    @reader.get("/schedules/{name}", response_model=ScheduleOut, tags=["schedules"])
    def get_schedule(name: Name) -> dict[str, Any]:
        return ctx.app.admin.get_schedule(_named("schedule", name)).to_json()

    @admin.post("/schedules/{name}/pause", response_model=ScheduleOut, tags=["schedules"])
    def pause_schedule(name: Name) -> dict[str, Any]:
        """Pause: its tick jobs not yet due are cancelled."""
        return ctx.app.admin.pause_schedule(_named("schedule", name)).to_json()

    @admin.post("/schedules/{name}/resume", response_model=ScheduleOut, tags=["schedules"])
    def resume_schedule(name: Name) -> dict[str, Any]:
        """Resume from now: ticks that fell in the pause are not missed ticks."""
        return ctx.app.admin.resume_schedule(_named("schedule", name)).to_json()

    @admin.post(
        "/schedules/{name}/trigger", status_code=201, response_model=EnqueuedOut, tags=["schedules"]
    )
    def trigger_schedule(name: Name) -> dict[str, Any]:
        """Enqueue the schedule's job now, outside its cadence; its cursor does not move."""
        result = ctx.app.admin.trigger_schedule(_named("schedule", name))
        return {"id": result.id, "created": result.created}


def _queue_routes(ctx: HttpContext, reader: APIRouter, admin: APIRouter) -> None:
    @reader.get("/queues", response_model=list[QueueOut], tags=["queues"])
    def list_queues() -> list[dict[str, Any]]:
        """Every queue with jobs or settings: its settings and its counts now."""
        return [_queue_json(state) for state in ctx.app.admin.list_queues()]

    @admin.post("/queues/{name}/pause", response_model=QueueOut, tags=["queues"])
    def pause_queue(name: Name, change: QueueChangeIn | None = None) -> dict[str, Any]:
        """Pause a known queue; 404 for a name nobody uses, unless `create` is true."""
        create = change is not None and change.create
        ctx.app.admin.pause_queue(_named("queue", name), create=create)
        return _queue_json(ctx.app.admin.get_queue(name))

    @admin.post("/queues/{name}/resume", response_model=QueueOut, tags=["queues"])
    def resume_queue(name: Name) -> dict[str, Any]:
        ctx.app.admin.resume_queue(_named("queue", name))
        return _queue_json(ctx.app.admin.get_queue(name))

    @admin.delete("/queues/{name}", response_model=QueueRemovedOut, tags=["queues"])
    def remove_queue_settings(name: Name) -> dict[str, Any]:
        """Delete an idle queue's stored settings, so it is no longer listed; 409 (naming the
        counts) while it has pending or running jobs, 404 for a queue nobody knows."""
        removal = ctx.app.admin.remove_queue(_named("queue", name))
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
        return fleet_json(ctx.app.admin.list_processes(every=include_all))


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
        raise input_error(exc, where) from None


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


def _queue_json(state: QueueState) -> dict[str, Any]:
    settings, counts = state.settings, state.counts
    return {
        "name": state.name,
        "paused": settings.paused,
        "rate": settings.rate,
        "burst": settings.burst,
        "concurrency": settings.concurrency,
        "key_limits": [
            {"pattern": k.pattern, "rate": k.rate, "burst": k.burst} for k in settings.key_limits
        ],
        "pending": counts.pending,
        "due": counts.due,
        "running": counts.running,
        "dead": counts.dead,
        "oldest_due_age": counts.oldest_due_age,
    }
