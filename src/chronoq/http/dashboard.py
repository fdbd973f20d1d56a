"""The web dashboard at `/`: server-rendered pages over the store, for people.

Pages (GET) need a session of at least read scope, opened with a token at `/login`. Actions
(POST) need admin scope and the session's CSRF token, and answer with a redirect back (303)
and a flash message. With no token configured everyone is an admin, as for the API; the server
then listens on loopback only, and every page says so.

Templates are Jinja2 with autoescape on, loaded from the package; the overview's charts are
drawn by `static/dashboard.js` from `/dashboard/overview.json`, which it polls.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Annotated, Any
from urllib.parse import urlencode

import jinja2
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from chronoq.core.cron import preview
from chronoq.core.durations import format_duration, parse_duration
from chronoq.core.jobs import Job, JobStatus
from chronoq.core.schedules import Schedule
from chronoq.core.validate import check_name
from chronoq.errors import ConfigError, InvalidDuration, InvalidSchedule
from chronoq.http.auth import Scope
from chronoq.http.context import HttpContext
from chronoq.http.views import read_overview
from chronoq.storage.base import DeadPurgeParams, DeadRequeueParams, JobListParams

PAGE_SIZE = 50
POLL_MS = 2000  # how often the overview and a live job page ask for fresh figures
SHOWN_TICKS = 3  # upcoming fire times listed per schedule
TRACEBACK_TAIL = 3  # traceback lines shown before the full one is unfolded
MAX_ID = 2**63 - 1  # larger ids cannot be stored, and SQLite raises on them
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


class BadInput(ValueError):
    """A form or query value the dashboard cannot use; its message is shown to the user."""


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


# -- templates ----------------------------------------------------------------------------


def _load_template(name: str) -> str | None:
    source = resources.files("chronoq.http").joinpath("templates").joinpath(name)
    return source.read_text(encoding="utf-8") if source.is_file() else None


def when(moment: datetime | str | None) -> str:
    """An instant as people read it at a glance: UTC, to the second."""
    if moment is None or moment == "":
        return "-"
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(text := moment)
        except ValueError:
            return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def local_when(moment: datetime) -> str:
    """An instant on its own wall clock, with the offset: schedules are read in their zone."""
    return moment.strftime("%Y-%m-%d %H:%M %z")


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if 0 < value < 0.001:  # "0ms" would read as "on the dot"
        return "<1ms"
    return format_duration(timedelta(seconds=max(0.0, float(value))))


def per_minute(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def traceback_tail(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return "\n".join(lines[-TRACEBACK_TAIL:])


TEMPLATES = jinja2.Environment(
    loader=jinja2.FunctionLoader(_load_template),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters.update(
    when=when,
    local_when=local_when,
    seconds=seconds,
    per_minute=per_minute,
    pretty_json=pretty_json,
    traceback_tail=traceback_tail,
)


# -- input --------------------------------------------------------------------------------


def parse_job_id(text: str, what: str = "job id") -> int:
    cleaned = text.strip()
    if not cleaned.isascii() or not cleaned.isdigit() or not 0 < int(cleaned) <= MAX_ID:
        raise BadInput(f"{what} must be a positive whole number, got {_quoted(text)}")
    return int(cleaned)


def parse_ids(values: Sequence[str]) -> list[int]:
    return sorted({parse_job_id(value) for value in values})


def parse_moment(text: str, what: str) -> datetime | None:
    """A date or date and time from a form; without an offset it is read as UTC."""
    cleaned = text.strip()
    if not cleaned:
        return None
    try:
        moment = datetime.fromisoformat(cleaned)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise BadInput(
            f"{what} must be a date such as 2026-01-31 or 2026-01-31T09:30 (UTC unless an "
            f"offset is given), got {_quoted(text)}"
        ) from None


def parse_status(text: str) -> JobStatus | None:
    if not text.strip():
        return None
    try:
        return JobStatus(text.strip())
    except ValueError:
        known = ", ".join(str(status) for status in JobStatus)
        raise BadInput(f"status must be one of {known}, got {_quoted(text)}") from None


def parse_text(text: str, what: str) -> str | None:
    """A name or key to filter on; empty means any. NUL cannot be stored, so cannot match."""
    if "\x00" in text:
        raise BadInput(f"{what} must not contain a NUL character")
    return text if text.strip() else None


def parse_older_than(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        raise BadInput(str(exc)) from None


def _quoted(text: str) -> str:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return repr(shown)


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
        html = TEMPLATES.get_template(template).render(
            viewer=viewer, flashes=flashes, path=request.url.path, **values
        )
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
            self.ctx.app.store.queue_pause(check_name("queue", name), paused)
        except ConfigError as exc:
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
        except BadInput as exc:
            return self.render(
                request, viewer, "jobs.html", status=400, form=form, error=str(exc), page=None
            )
        page = self._page(params, form)
        return self.render(request, viewer, "jobs.html", form=form, error="", page=page)

    @staticmethod
    def _job_search(form: dict[str, str], before_id: str) -> JobListParams:
        status = parse_status(form["status"])
        return JobListParams(
            statuses=(status,) if status is not None else (),
            queue=parse_text(form["queue"], "queue"),
            task=parse_text(form["task"], "task"),
            key=parse_text(form["key"], "key"),
            created_after=parse_moment(form["created_after"], "created after"),
            created_before=parse_moment(form["created_before"], "created before"),
            before_id=parse_job_id(before_id, "before_id") if before_id.strip() else None,
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
            number = parse_job_id(job_id)
        except BadInput as exc:
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
            job = self.ctx.app.store.job_get(parse_job_id(job_id))
        except BadInput as exc:
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
            number = parse_job_id(job_id)
        except BadInput as exc:
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
                queue=parse_text(queue, "queue"),
                task=parse_text(task, "task"),
                before_id=parse_job_id(before_id, "before_id") if before_id.strip() else None,
                limit=PAGE_SIZE + 1,
            )
        except BadInput as exc:
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
        except BadInput as exc:
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
        queue_name, task_name = parse_text(queue, "queue"), parse_text(task, "task")
        if everything:
            return DeadRequeueParams(ids=None, queue=queue_name, task=task_name)
        chosen = parse_ids(ids or [])
        if not chosen:
            raise BadInput("Select at least one dead job first.")
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
        except BadInput as exc:
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
        queue_name, task_name = parse_text(queue, "queue"), parse_text(task, "task")
        if older_than.strip():
            age = parse_older_than(older_than)
            return DeadPurgeParams(older_than=age, queue=queue_name, task=task_name)
        chosen = parse_ids(ids or [])
        if not chosen:
            raise BadInput("Select at least one dead job, or give an age such as 7d.")
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
        if "\x00" in name or self.ctx.app.store.schedule_pause(name, paused) is None:
            self.flash(request, "error", f"There is no schedule named {_quoted(name)}.")
        else:
            self.flash(request, "ok", f"{'Paused' if paused else 'Resumed'} schedule {name}")
        return RedirectResponse("/schedules", status_code=303)


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
