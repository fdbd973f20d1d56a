"""The web dashboard at `/`: server-rendered pages over the store, for people.

Pages (GET) need a session of at least read scope, opened with a token at `/login`. Actions
(POST) need admin scope and the session's CSRF token, and answer with a redirect back (303)
and a flash message. With no token configured everyone is an admin, as for the API; the server
then listens on loopback only, and every page says so.

Templates are set up in `templating`; form and query values are read by `fields`, as the
API's are. The overview's charts are drawn by `static/dashboard.js`
from `/dashboard/overview.json`, which it polls.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from chronoq.core.cron import preview
from chronoq.core.jobs import Job, JobStatus
from chronoq.core.schedules import Schedule
from chronoq.errors import InvalidSchedule
from chronoq.http import fields
from chronoq.http.auth import Scope
from chronoq.http.context import HttpContext
from chronoq.http.fields import FieldError, optional
from chronoq.http.templating import render, seconds
from chronoq.http.views import read_overview
from chronoq.storage.base import DeadPurgeParams, DeadRequeueParams, JobListParams

PAGE_SIZE = 50
POLL_MS = 2000  # how often the overview and a live job page ask for fresh figures
SHOWN_TICKS = 3  # upcoming fire times listed per schedule
FLASH_LIMIT = 300  # characters per flash message: they travel in the session cookie
SHOWN_IDS = 10  # ids listed in a flash message before "and N more"

SCOPE_KEY = "scope"
CSRF_KEY = "csrf"
FLASH_KEY = "flash"

CANCELLABLE = frozenset({JobStatus.PENDING, JobStatus.RUNNING})

# Pages show job data and carry admin forms: never cache them, never frame them (clickjacking),
# and run no script or style but the dashboard's own files.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
}
JSON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: their scope (None: not signed in) and their session's CSRF token."""

    scope: Scope | None
    csrf: str
    open: bool

    @property
    def admin(self) -> bool:
        return self.scope is Scope.ADMIN

    @property
    def role(self) -> str:
        return "admin" if self.admin else "read-only"


# -- input --------------------------------------------------------------------------------


def local_path(target: str, default: str) -> str:
    """Where to send the browser back to: a path of this site only, never another origin."""
    if (
        target.startswith("/")
        and not target.startswith("//")
        and "\\" not in target
        and all(32 < ord(ch) < 127 for ch in target)
    ):
        return target
    return default


def same_token(presented: str, expected: str) -> bool:
    if not presented or not expected:
        return False
    return hmac.compare_digest(
        presented.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def _id_list(ids: Sequence[int]) -> str:
    shown = ", ".join(str(job_id) for job_id in ids[:SHOWN_IDS])
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return f": {shown}{more}" if ids else ""


def _query(values: Mapping[str, str | int | None]) -> str:
    kept = {name: value for name, value in values.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


# -- pages --------------------------------------------------------------------------------


def dashboard_routes(ctx: HttpContext) -> APIRouter:
    dashboard = Dashboard(ctx)
    router = APIRouter(include_in_schema=False)
    pages: list[tuple[str, Callable[..., Response], str]] = [
        ("/login", dashboard.login_form, "GET"),
        ("/login", dashboard.login, "POST"),
        ("/logout", dashboard.logout, "POST"),
        ("/", dashboard.overview, "GET"),
        ("/dashboard/overview.json", dashboard.overview_json, "GET"),
        ("/queues/pause", dashboard.queue_pause, "POST"),
        ("/queues/resume", dashboard.queue_resume, "POST"),
        ("/jobs", dashboard.jobs, "GET"),
        ("/jobs/{job_id}", dashboard.job, "GET"),
        ("/dashboard/jobs/{job_id}.json", dashboard.job_json, "GET"),
        ("/jobs/{job_id}/cancel", dashboard.job_cancel, "POST"),
        ("/dead", dashboard.dead, "GET"),
        ("/dead/requeue", dashboard.dead_requeue, "POST"),
        ("/dead/purge", dashboard.dead_purge, "POST"),
        ("/schedules", dashboard.schedules, "GET"),
        ("/schedules/pause", dashboard.schedule_pause, "POST"),
        ("/schedules/resume", dashboard.schedule_resume, "POST"),
    ]
    for path, endpoint, method in pages:
        router.add_api_route(path, endpoint, methods=[method], response_class=HTMLResponse)
    return router


Csrf = Annotated[str, Form()]
Field = Annotated[str, Form()]
Ids = Annotated[list[str] | None, Form()]


class Dashboard:
    """The dashboard's routes, as methods sharing the server's context."""

    def __init__(self, ctx: HttpContext) -> None:
        self.ctx = ctx

    # -- sessions -------------------------------------------------------------------------

    def viewer(self, request: Request) -> Viewer:
        session = request.session
        csrf = session.get(CSRF_KEY)
        if not isinstance(csrf, str) or not csrf:
            csrf = session[CSRF_KEY] = secrets.token_urlsafe(32)
        return Viewer(self._scope(session), csrf, self.ctx.tokens.open)

    def _scope(self, session: dict[str, Any]) -> Scope | None:
        if self.ctx.tokens.open:
            return Scope.ADMIN
        stored = session.get(SCOPE_KEY)
        try:
            return Scope(stored) if isinstance(stored, int) else None
        except ValueError:  # a scope this version does not know: sign in again
            return None

    def reader(self, request: Request) -> Viewer | Response:
        """The viewer of a page, or a redirect to the login form."""
        viewer = self.viewer(request)
        if viewer.scope is None:
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse("/login" + _query({"next": here}), status_code=303)
        return viewer

    def actor(self, request: Request, csrf: str) -> Viewer | Response:
        """The admin behind an action, or a 403 page."""
        viewer = self.viewer(request)
        if not same_token(csrf, viewer.csrf):
            return self.refuse(
                request,
                viewer,
                "This form has expired or did not come from this dashboard (its CSRF token "
                "does not match your session). Reload the page and try again.",
            )
        if not viewer.admin:
            return self.refuse(request, viewer, "Actions need an admin token; yours may only look.")
        return viewer

    def refuse(self, request: Request, viewer: Viewer, message: str) -> HTMLResponse:
        return self.render(
            request, viewer, "message.html", status=403, title="Forbidden", message=message
        )

    def render(
        self, request: Request, viewer: Viewer, template: str, *, status: int = 200, **values: Any
    ) -> HTMLResponse:
        flashes = request.session.pop(FLASH_KEY, [])
        html = render(template, viewer=viewer, flashes=flashes, path=request.url.path, **values)
        return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)

    @staticmethod
    def flash(request: Request, kind: str, text: str) -> None:
        clipped = text if len(text) <= FLASH_LIMIT else text[: FLASH_LIMIT - 3] + "..."
        request.session.setdefault(FLASH_KEY, []).append([kind, clipped])

    @staticmethod
    def back(target: str, default: str) -> RedirectResponse:
        return RedirectResponse(local_path(target, default), status_code=303)

    # -- login ----------------------------------------------------------------------------

    def login_form(self, request: Request, next: str = "/") -> Response:
        viewer = self.viewer(request)
        if viewer.scope is not None:
            return RedirectResponse(local_path(next, "/"), status_code=303)
        return self.render(request, viewer, "login.html", next=local_path(next, "/"), error="")

    def login(
        self, request: Request, csrf: Csrf = "", token: Field = "", next: Field = "/"
    ) -> Response:
        viewer = self.viewer(request)
        target = local_path(next, "/")
        if not same_token(csrf, viewer.csrf):
            return self.refuse(request, viewer, "The login form expired; reload it and sign in.")
        scope = self.ctx.tokens.scope_of(token)
        if scope is None:
            return self.render(
                request, viewer, "login.html", status=401, next=target, error="Unknown token."
            )
        # A fresh session at each login, so nothing set before it (a planted cookie) survives.
        request.session.clear()
        request.session[SCOPE_KEY] = int(scope)
        request.session[CSRF_KEY] = secrets.token_urlsafe(32)
        self.flash(request, "ok", f"Signed in ({'admin' if scope is Scope.ADMIN else 'read-only'})")
        return RedirectResponse(target, status_code=303)

    def logout(self, request: Request, csrf: Csrf = "") -> Response:
        viewer = self.viewer(request)
        if not same_token(csrf, viewer.csrf):
            return self.refuse(request, viewer, "The form expired; reload the page to sign out.")
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    # -- overview and queues --------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        viewer = self.reader(request)
        if isinstance(viewer, Response):
            return viewer
        data = read_overview(self.ctx.recent, self.ctx.app.store)
        return self.render(request, viewer, "overview.html", data=data, poll_ms=POLL_MS)

    def overview_json(self, request: Request) -> Response:
        if self.viewer(request).scope is None:
            return JSONResponse({"error": "sign in first"}, status_code=401, headers=JSON_HEADERS)
        return JSONResponse(
            read_overview(self.ctx.recent, self.ctx.app.store), headers=JSON_HEADERS
        )

    def queue_pause(self, request: Request, csrf: Csrf = "", name: Field = "") -> Response:
        return self._queue_paused(request, csrf, name, paused=True)

    def queue_resume(self, request: Request, csrf: Csrf = "", name: Field = "") -> Response:
        return self._queue_paused(request, csrf, name, paused=False)

    def _queue_paused(self, request: Request, csrf: str, name: str, *, paused: bool) -> Response:
        actor = self.actor(request, csrf)
        if isinstance(actor, Response):
            return actor
        try:
            self.ctx.app.store.queue_pause(fields.name("queue", name), paused)
        except FieldError as exc:
            self.flash(request, "error", str(exc))
        else:
            self.flash(request, "ok", f"{'Paused' if paused else 'Resumed'} queue {name}")
        return RedirectResponse("/", status_code=303)

    # -- jobs -----------------------------------------------------------------------------

    def jobs(
        self,
        request: Request,
        status: str = "",
        queue: str = "",
        task: str = "",
        key: str = "",
        created_after: str = "",
        created_before: str = "",
        before_id: str = "",
    ) -> Response:
        viewer = self.reader(request)
        if isinstance(viewer, Response):
            return viewer
        form = {
            "status": status,
            "queue": queue,
            "task": task,
            "key": key,
            "created_after": created_after,
            "created_before": created_before,
        }
        try:
            params = self._job_search(form, before_id)
        except FieldError as exc:
            return self.render(
                request, viewer, "jobs.html", status=400, form=form, error=str(exc), page=None
            )
        page = self._page(params, form)
        return self.render(request, viewer, "jobs.html", form=form, error="", page=page)

    @staticmethod
    def _job_search(form: dict[str, str], before_id: str) -> JobListParams:
        status = fields.status("status", form["status"])
        return JobListParams(
            statuses=(status,) if status is not None else (),
            queue=fields.name_filter("queue", optional(form["queue"])),
            task=fields.name_filter("task", optional(form["task"])),
            key=fields.key_filter(optional(form["key"])),
            created_after=fields.form_instant("created after", form["created_after"]),
            created_before=fields.form_instant("created before", form["created_before"]),
            before_id=_cursor(before_id),
            limit=PAGE_SIZE + 1,
        )

    def _page(self, params: JobListParams, form: dict[str, str]) -> JobPage:
        """One page of a search, newest first, with the cursor of the next one if any."""
        found = self.ctx.app.store.job_list(params)
        jobs = found[:PAGE_SIZE]
        older = _query({**form, "before_id": jobs[-1].id}) if len(found) > PAGE_SIZE else None
        newest = _query(dict(form)) if params.before_id is not None else None
        return JobPage(jobs, older, newest)

    def job(self, request: Request, job_id: str) -> Response:
        viewer = self.reader(request)
        if isinstance(viewer, Response):
            return viewer
        found = self._find_job(request, viewer, job_id)
        if isinstance(found, Response):
            return found
        return self.render(
            request,
            viewer,
            "job.html",
            job=found,
            live=not found.status.is_final,
            cancellable=found.status in CANCELLABLE,
            poll_ms=POLL_MS,
        )

    def _find_job(self, request: Request, viewer: Viewer, job_id: str) -> Job | Response:
        try:
            number = fields.job_id("job id", job_id)
        except FieldError as exc:
            return self.render(
                request, viewer, "message.html", status=400, title="Bad job id", message=str(exc)
            )
        job = self.ctx.app.store.job_get(number)
        if job is None:
            return self.render(
                request,
                viewer,
                "message.html",
                status=404,
                title="No such job",
                message=f"There is no job {number}; it may have been pruned or purged.",
            )
        return job

    def job_json(self, request: Request, job_id: str) -> Response:
        """What a live job page compares with what it shows, to reload when the job moved."""
        if self.viewer(request).scope is None:
            return JSONResponse({"error": "sign in first"}, status_code=401, headers=JSON_HEADERS)
        try:
            job = self.ctx.app.store.job_get(fields.job_id("job id", job_id))
        except FieldError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400, headers=JSON_HEADERS)
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404, headers=JSON_HEADERS)
        body = {"id": job.id, "status": str(job.status), "attempts": job.attempts}
        return JSONResponse(body, headers=JSON_HEADERS)

    def job_cancel(self, request: Request, job_id: str, csrf: Csrf = "") -> Response:
        actor = self.actor(request, csrf)
        if isinstance(actor, Response):
            return actor
        try:
            number = fields.job_id("job id", job_id)
        except FieldError as exc:
            self.flash(request, "error", str(exc))
            return RedirectResponse("/jobs", status_code=303)
        job = self.ctx.app.store.job_cancel(number)
        if job is None:
            self.flash(request, "error", f"There is no job {number}.")
            return RedirectResponse("/jobs", status_code=303)
        if job.status is JobStatus.CANCELLED:
            self.flash(request, "ok", f"Cancelled job {number}")
        else:
            self.flash(
                request,
                "error",
                f"Job {number} is {job.status}; only pending or running jobs can be cancelled.",
            )
        return RedirectResponse(f"/jobs/{number}", status_code=303)

    # -- dead letters ---------------------------------------------------------------------

    def dead(
        self, request: Request, queue: str = "", task: str = "", before_id: str = ""
    ) -> Response:
        viewer = self.reader(request)
        if isinstance(viewer, Response):
            return viewer
        form = {"queue": queue, "task": task}
        here = request.url.path + _query({**form, "before_id": before_id})
        try:
            params = JobListParams(
                statuses=(JobStatus.DEAD,),
                queue=fields.name_filter("queue", optional(queue)),
                task=fields.name_filter("task", optional(task)),
                before_id=_cursor(before_id),
                limit=PAGE_SIZE + 1,
            )
        except FieldError as exc:
            return self.render(
                request,
                viewer,
                "dead.html",
                status=400,
                form=form,
                error=str(exc),
                page=None,
                here="/dead",
            )
        page = self._page(params, form)
        return self.render(request, viewer, "dead.html", form=form, error="", page=page, here=here)

    def dead_requeue(
        self,
        request: Request,
        csrf: Csrf = "",
        ids: Ids = None,
        everything: Field = "",
        queue: Field = "",
        task: Field = "",
        back: Field = "/dead",
    ) -> Response:
        actor = self.actor(request, csrf)
        if isinstance(actor, Response):
            return actor
        try:
            params = self._dead_selection(ids, everything, queue, task)
        except FieldError as exc:
            self.flash(request, "error", str(exc))
            return self.back(back, "/dead")
        result = self.ctx.app.store.dead_requeue(params)
        self.flash(
            request, "ok", f"Requeued {len(result.requeued)} job(s){_id_list(result.requeued)}"
        )
        if result.key_conflicts:
            self.flash(
                request,
                "error",
                f"Kept dead {len(result.key_conflicts)} job(s) whose key a live job holds"
                f"{_id_list(result.key_conflicts)}",
            )
        return self.back(back, "/dead")

    @staticmethod
    def _dead_selection(
        ids: Sequence[str] | None, everything: str, queue: str, task: str
    ) -> DeadRequeueParams:
        """The checked jobs, or with `everything` every dead job of the filter."""
        queue_name = fields.name_filter("queue", optional(queue))
        task_name = fields.name_filter("task", optional(task))
        if everything:
            return DeadRequeueParams(ids=None, queue=queue_name, task=task_name)
        chosen = fields.job_ids("job id", ids or [])
        if not chosen:
            raise FieldError("ids", "Select at least one dead job first.")
        return DeadRequeueParams(ids=chosen, queue=queue_name, task=task_name)

    def dead_purge(
        self,
        request: Request,
        csrf: Csrf = "",
        ids: Ids = None,
        older_than: Field = "",
        queue: Field = "",
        task: Field = "",
        back: Field = "/dead",
    ) -> Response:
        actor = self.actor(request, csrf)
        if isinstance(actor, Response):
            return actor
        try:
            params = self._purge_selection(ids, older_than, queue, task)
        except FieldError as exc:
            self.flash(request, "error", str(exc))
            return self.back(back, "/dead")
        purged = self.ctx.app.store.dead_purge(params)
        self.flash(request, "ok", f"Purged {purged} dead job(s)")
        return self.back(back, "/dead")

    @staticmethod
    def _purge_selection(
        ids: Sequence[str] | None, older_than: str, queue: str, task: str
    ) -> DeadPurgeParams:
        """The checked jobs, or with `older_than` the filter's jobs that died that long ago."""
        queue_name = fields.name_filter("queue", optional(queue))
        task_name = fields.name_filter("task", optional(task))
        if older_than.strip():
            age = fields.duration("older than", older_than)
            return DeadPurgeParams(older_than=age, queue=queue_name, task=task_name)
        chosen = fields.job_ids("job id", ids or [])
        if not chosen:
            raise FieldError("ids", "Select at least one dead job, or give an age such as 7d.")
        return DeadPurgeParams(ids=chosen, queue=queue_name, task=task_name)

    # -- schedules ------------------------------------------------------------------------

    def schedules(self, request: Request) -> Response:
        viewer = self.reader(request)
        if isinstance(viewer, Response):
            return viewer
        rows = [ScheduleRow(s, upcoming(s)) for s in self.ctx.app.store.schedule_list()]
        return self.render(request, viewer, "schedules.html", rows=rows)

    def schedule_pause(self, request: Request, csrf: Csrf = "", name: Field = "") -> Response:
        return self._schedule_paused(request, csrf, name, paused=True)

    def schedule_resume(self, request: Request, csrf: Csrf = "", name: Field = "") -> Response:
        return self._schedule_paused(request, csrf, name, paused=False)

    def _schedule_paused(self, request: Request, csrf: str, name: str, *, paused: bool) -> Response:
        actor = self.actor(request, csrf)
        if isinstance(actor, Response):
            return actor
        store = self.ctx.app.store
        if not _is_name("schedule", name) or store.schedule_pause(name, paused) is None:
            self.flash(request, "error", f"There is no schedule named {fields.quoted(name)}.")
        else:
            self.flash(request, "ok", f"{'Paused' if paused else 'Resumed'} schedule {name}")
        return RedirectResponse("/schedules", status_code=303)


def _cursor(before_id: str) -> int | None:
    return fields.job_id("before_id", before_id) if before_id.strip() else None


def _is_name(kind: str, value: str) -> bool:
    """Could `value` name a stored schedule (or queue, task) at all?"""
    try:
        fields.name(kind, value)
    except FieldError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class JobPage:
    """Jobs of one page; `older` and `newest` are query strings (None: no such link)."""

    jobs: list[Job]
    older: str | None
    newest: str | None


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    schedule: Schedule
    next_ticks: list[datetime]

    @property
    def late_text(self) -> str:
        s = self.schedule
        if not s.late:
            return "0"
        return f"{s.late} (mean {seconds(s.lateness_mean)}, max {seconds(s.lateness_max)})"


def upcoming(schedule: Schedule) -> list[datetime]:
    """Its next fire times on its own wall clock (none while paused, or if the cadence no longer
    parses, which the page shows rather than failing)."""
    if schedule.paused:
        return []
    start = schedule.tick_cursor
    if schedule.next_tick is not None:
        start = schedule.next_tick - timedelta(microseconds=1)
    try:
        return preview(schedule.parsed_cadence(), start, SHOWN_TICKS)
    except InvalidSchedule:
        return []
