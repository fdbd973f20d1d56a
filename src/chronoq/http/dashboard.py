"""The web dashboard at `/`: server-rendered pages over the store, for people.

Pages (GET) need a session of at least read scope, opened with a token at `/login`. Actions
(POST) need admin scope and the session's CSRF token, and answer with a redirect back (303)
and a flash message. With no token configured everyone is an admin, as for the API; the server
then listens on loopback only, and every page says so.

Each route names the session it needs as a dependency (`Reader`, `Admin`, ...; sessions and
their checks are in `auth`); a request without it never reaches the route, and the exception
handlers installed here answer it: a stranger's page request with the login form, a form
without its CSRF token or admin scope with a 403 page. Form and query values are read by
`fields`, as the API's are (what each form asks for is in `forms`); actions call the admin API
(`app.admin`) and turn its answer or error into a flash message; templates are set up in
`templating`, and the rows of pages that are more than records in `rows`. The overview's charts are
drawn by `static/dashboard.js` from `/dashboard/overview.json`, which it polls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from chronoq.core.jobs import JobStatus
from chronoq.errors import (
    ConfigError,
    JobFinished,
    JobNotFound,
    QueueNotFound,
    ScheduleNotFound,
    StoreUnavailable,
)
from chronoq.fleet.records import Fleet
from chronoq.fleet.view import ordered, scheduler_warning
from chronoq.http import fields
from chronoq.http.auth import (
    Refused,
    Session,
    SignInRequired,
    admin_sender,
    authentication_failed,
    data_reader,
    end_session,
    form_sender,
    page_reader,
    read_session,
    sign_in,
    throttled_for,
    visitor,
)
from chronoq.http.context import HttpContext
from chronoq.http.errors import STORE_UNAVAILABLE, log_store_unavailable, store_unavailable
from chronoq.http.fields import FieldError
from chronoq.http.forms import (
    PAGE_SIZE,
    dead_search,
    job_search,
    purge_selection,
    requeue_selection,
    running_search,
)
from chronoq.http.rows import JobPage, ScheduleRow, upcoming
from chronoq.http.templating import render
from chronoq.http.views import read_overview
from chronoq.storage.base import JobListParams
from chronoq.tier.status import read_tier

POLL_MS = 2000  # how often the overview and a live job page ask for fresh figures
FLASH_LIMIT = 300  # characters per flash message: they travel in the session cookie
SHOWN_IDS = 10  # ids listed in a flash message before "and N more"
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

CSRF_MISMATCH = (
    "This form has expired or did not come from this dashboard (its CSRF token does not match "
    "your session). Reload the page and try again."
)

# The session each route needs; see `auth` for what each checks.
Visitor = Annotated[Session, Depends(visitor)]
Reader = Annotated[Session, Depends(page_reader)]
Poller = Annotated[Session, Depends(data_reader)]
LoginSender = Annotated[
    Session, Depends(form_sender("The login form expired; reload it and sign in."))
]
LogoutSender = Annotated[
    Session, Depends(form_sender("The form expired; reload the page to sign out."))
]
Admin = Annotated[
    Session,
    Depends(admin_sender(CSRF_MISMATCH, "Actions need an admin token; yours may only look.")),
]
Field = Annotated[str, Form()]
Ids = Annotated[list[str] | None, Form()]


# -- answers ------------------------------------------------------------------------------


def render_page(
    request: Request, viewer: Session, template: str, *, status: int = 200, **values: Any
) -> HTMLResponse:
    """A page for `viewer`, showing (once) the flash messages waiting in the session."""
    flashes = request.session.pop(FLASH_KEY, [])
    html = render(template, viewer=viewer, flashes=flashes, path=request.url.path, **values)
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def render_message(
    request: Request, viewer: Session, status: int, title: str, message: str
) -> HTMLResponse:
    return render_page(request, viewer, "message.html", status=status, title=title, message=message)


def flash(request: Request, kind: str, text: str) -> None:
    """A message for the next page the session sees."""
    clipped = text if len(text) <= FLASH_LIMIT else text[: FLASH_LIMIT - 3] + "..."
    request.session.setdefault(FLASH_KEY, []).append([kind, clipped])


def see_other(target: str) -> RedirectResponse:
    return RedirectResponse(target, status_code=303)


def go_back(target: str, default: str) -> RedirectResponse:
    return see_other(local_path(target, default))


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


def json_answer(body: Mapping[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=JSON_HEADERS)


def _sign_in_first(request: Request, exc: SignInRequired) -> Response:
    if not exc.page:
        return json_answer({"error": "sign in first"}, 401)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return see_other("/login" + _query({"next": here}))


def _refused(request: Request, exc: Refused) -> Response:
    return render_message(request, exc.session, 403, "Forbidden", exc.message)


def _store_unavailable(request: Request, exc: StoreUnavailable) -> Response:
    """A page for a browser, the data a page polls as JSON, the API's answer elsewhere; none of
    them says more than that the database is unavailable (the log has the rest)."""
    path = request.url.path
    if path.startswith("/api/"):
        return store_unavailable(request, exc)
    log_store_unavailable(request, exc)
    if path.startswith("/dashboard/"):
        return json_answer({"error": STORE_UNAVAILABLE}, 503)
    message = "The database is unavailable. Try again in a moment; the server log says why."
    return render_message(request, read_session(request), 503, "Database unavailable", message)


def _login_throttled(request: Request, viewer: Session, target: str, wait: int) -> Response:
    error = (
        f"Too many failed sign-ins from your address. Try again in {wait} seconds; "
        "until then no token is checked."
    )
    page = render_page(request, viewer, "login.html", status=429, next=target, error=error)
    page.headers["Retry-After"] = str(wait)
    return page


def _id_list(ids: Sequence[int]) -> str:
    shown = ", ".join(str(job_id) for job_id in ids[:SHOWN_IDS])
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return f": {shown}{more}" if ids else ""


def _sentence(text: str) -> str:
    """A message of the admin API as a flash shows it: capitalised, and ended."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def _query(values: Mapping[str, str | int | None]) -> str:
    kept = {name: value for name, value in values.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


# -- routes -------------------------------------------------------------------------------


def install_dashboard(server: FastAPI, ctx: HttpContext) -> None:
    """The dashboard's routes on `server`, and the answers to requests they refuse."""
    server.include_router(dashboard_routes(ctx))
    server.add_exception_handler(SignInRequired, _sign_in_first)  # type: ignore[arg-type]
    server.add_exception_handler(Refused, _refused)  # type: ignore[arg-type]
    server.add_exception_handler(StoreUnavailable, _store_unavailable)  # type: ignore[arg-type]


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
        ("/running", dashboard.running, "GET"),
        ("/jobs/{job_id}", dashboard.job, "GET"),
        ("/dashboard/jobs/{job_id}.json", dashboard.job_json, "GET"),
        ("/jobs/{job_id}/cancel", dashboard.job_cancel, "POST"),
        ("/dead", dashboard.dead, "GET"),
        ("/dead/requeue", dashboard.dead_requeue, "POST"),
        ("/dead/purge", dashboard.dead_purge, "POST"),
        ("/schedules", dashboard.schedules, "GET"),
        ("/schedules/pause", dashboard.schedule_pause, "POST"),
        ("/schedules/resume", dashboard.schedule_resume, "POST"),
        ("/processes", dashboard.processes, "GET"),
    ]
    for path, endpoint, method in pages:
        router.add_api_route(path, endpoint, methods=[method], response_class=HTMLResponse)
    return router


class Dashboard:
    """The dashboard's routes, as methods sharing the server's context."""

    def __init__(self, ctx: HttpContext) -> None:
        self.ctx = ctx

    # -- login ----------------------------------------------------------------------------

    def login_form(self, request: Request, viewer: Visitor, next: str = "/") -> Response:
        target = local_path(next, "/")
        if viewer.signed_in:
            return see_other(target)
        return render_page(request, viewer, "login.html", next=target, error="")

    def login(
        self, request: Request, viewer: LoginSender, token: Field = "", next: Field = "/"
    ) -> Response:
        target = local_path(next, "/")
        wait = throttled_for(request)
        if wait is not None:  # the token is not even looked at
            return _login_throttled(request, viewer, target, wait)
        session = sign_in(request, token)
        if session is None:
            authentication_failed(request, "unknown token" if token else "no token")
            return render_page(
                request, viewer, "login.html", status=401, next=target, error="Unknown token."
            )
        flash(request, "ok", f"Signed in ({session.role})")
        return see_other(target)

    def logout(self, request: Request, viewer: LogoutSender) -> Response:
        end_session(request)
        return see_other("/login")

    # -- overview and queues --------------------------------------------------------------

    def overview(self, request: Request, viewer: Reader) -> Response:
        data = read_overview(self.ctx.recent, self.ctx.app.store)
        tier = read_tier(self.ctx.app.runtime())
        warning = scheduler_warning(self.ctx.app.admin.list_schedules(), self._live())
        return render_page(
            request,
            viewer,
            "overview.html",
            data=data,
            tier=tier,
            poll_ms=POLL_MS,
            scheduler_warning=warning,
        )

    def overview_json(self, viewer: Poller) -> Response:
        return json_answer(read_overview(self.ctx.recent, self.ctx.app.store))

    def queue_pause(self, request: Request, actor: Admin, name: Field = "") -> Response:
        return self._queue_paused(request, name, paused=True)

    def queue_resume(self, request: Request, actor: Admin, name: Field = "") -> Response:
        return self._queue_paused(request, name, paused=False)

    def _queue_paused(self, request: Request, name: str, *, paused: bool) -> Response:
        admin = self.ctx.app.admin
        try:
            if paused:
                admin.pause_queue(name)
            else:
                admin.resume_queue(name)
        except (ConfigError, QueueNotFound) as exc:
            flash(request, "error", str(exc))
        else:
            flash(request, "ok", f"{'Paused' if paused else 'Resumed'} queue {name}")
        return see_other("/")

    # -- jobs -----------------------------------------------------------------------------

    def jobs(
        self,
        request: Request,
        viewer: Reader,
        status: str = "",
        queue: str = "",
        task: str = "",
        key: str = "",
        created_after: str = "",
        created_before: str = "",
        before_id: str = "",
    ) -> Response:
        form = {
            "status": status,
            "queue": queue,
            "task": task,
            "key": key,
            "created_after": created_after,
            "created_before": created_before,
        }
        try:
            params = job_search(form, before_id)
        except FieldError as exc:
            return render_page(
                request, viewer, "jobs.html", status=400, form=form, error=str(exc), page=None
            )
        page = self._page(params, form)
        return render_page(request, viewer, "jobs.html", form=form, error="", page=page)

    def _page(self, params: JobListParams, form: dict[str, str]) -> JobPage:
        """One page of a search, newest first, with the cursor of the next one if any."""
        found = self.ctx.app.admin.list_jobs(params)
        jobs = found[:PAGE_SIZE]
        older = _query({**form, "before_id": jobs[-1].id}) if len(found) > PAGE_SIZE else None
        newest = _query(dict(form)) if params.before_id is not None else None
        return JobPage(jobs, older, newest)

    def job(self, request: Request, job_id: str, viewer: Reader) -> Response:
        try:
            number = fields.job_id("job id", job_id)
        except FieldError as exc:
            return render_message(request, viewer, 400, "Bad job id", str(exc))
        try:
            job = self.ctx.app.admin.get_job(number)
        except JobNotFound:
            message = f"There is no job {number}; it may have been pruned or purged."
            return render_message(request, viewer, 404, "No such job", message)
        return render_page(
            request,
            viewer,
            "job.html",
            job=job,
            live=not job.status.is_final,
            cancellable=job.status in CANCELLABLE,
            poll_ms=POLL_MS,
        )

    def job_json(self, job_id: str, viewer: Poller) -> Response:
        """What a live job page compares with what it shows, to reload when the job moved."""
        try:
            job = self.ctx.app.admin.get_job(fields.job_id("job id", job_id))
        except FieldError as exc:
            return json_answer({"error": str(exc)}, 400)
        except JobNotFound:
            return json_answer({"error": "no such job"}, 404)
        return json_answer(
            {
                "id": job.id,
                "status": str(job.status),
                "attempts": job.attempts,
                "progress": job.progress,
                "progress_note": job.progress_note,
            }
        )

    def job_cancel(self, request: Request, job_id: str, actor: Admin) -> Response:
        try:
            number = fields.job_id("job id", job_id)
        except FieldError as exc:
            flash(request, "error", str(exc))
            return see_other("/jobs")
        try:
            self.ctx.app.admin.cancel_job(number)
        except JobNotFound:
            flash(request, "error", f"There is no job {number}.")
            return see_other("/jobs")
        except JobFinished as exc:
            flash(request, "error", _sentence(str(exc)))
        else:
            flash(request, "ok", f"Cancelled job {number}")
        return see_other(f"/jobs/{number}")

    def running(
        self, request: Request, viewer: Reader, queue: str = "", before_id: str = ""
    ) -> Response:
        """The running jobs, newest first, with the progress their attempts reported."""
        form = {"queue": queue}
        try:
            params = running_search(queue, before_id)
        except FieldError as exc:
            return render_page(
                request, viewer, "running.html", status=400, form=form, error=str(exc), page=None
            )
        page = self._page(params, form)
        return render_page(request, viewer, "running.html", form=form, error="", page=page)

    # -- dead letters ---------------------------------------------------------------------

    def dead(
        self, request: Request, viewer: Reader, queue: str = "", task: str = "", before_id: str = ""
    ) -> Response:
        form = {"queue": queue, "task": task}
        here = request.url.path + _query({**form, "before_id": before_id})
        try:
            params = dead_search(queue, task, before_id)
        except FieldError as exc:
            return render_page(
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
        return render_page(request, viewer, "dead.html", form=form, error="", page=page, here=here)

    def dead_requeue(
        self,
        request: Request,
        actor: Admin,
        ids: Ids = None,
        everything: Field = "",
        queue: Field = "",
        task: Field = "",
        back: Field = "/dead",
    ) -> Response:
        try:
            params = requeue_selection(ids, everything, queue, task)
        except FieldError as exc:
            flash(request, "error", str(exc))
            return go_back(back, "/dead")
        result = self.ctx.app.admin.requeue_dead(params)
        flash(request, "ok", f"Requeued {len(result.requeued)} job(s){_id_list(result.requeued)}")
        if result.key_conflicts:
            flash(
                request,
                "error",
                f"Kept dead {len(result.key_conflicts)} job(s) whose key a live job holds"
                f"{_id_list(result.key_conflicts)}",
            )
        return go_back(back, "/dead")

    def dead_purge(
        self,
        request: Request,
        actor: Admin,
        ids: Ids = None,
        older_than: Field = "",
        queue: Field = "",
        task: Field = "",
        back: Field = "/dead",
    ) -> Response:
        try:
            params = purge_selection(ids, older_than, queue, task)
        except FieldError as exc:
            flash(request, "error", str(exc))
            return go_back(back, "/dead")
        purged = self.ctx.app.admin.purge_dead(params)
        flash(request, "ok", f"Purged {purged} dead job(s)")
        return go_back(back, "/dead")

    # -- schedules ------------------------------------------------------------------------

    def schedules(self, request: Request, viewer: Reader) -> Response:
        schedules = self.ctx.app.admin.list_schedules()
        fleet = self._live()
        warning = scheduler_warning(schedules, fleet)
        unfired_at = fleet.db_now if warning is not None else None
        rows = [ScheduleRow(s, upcoming(s), unfired_at) for s in schedules]
        return render_page(request, viewer, "schedules.html", rows=rows, scheduler_warning=warning)

    def schedule_pause(self, request: Request, actor: Admin, name: Field = "") -> Response:
        return self._schedule_paused(request, name, paused=True)

    def schedule_resume(self, request: Request, actor: Admin, name: Field = "") -> Response:
        return self._schedule_paused(request, name, paused=False)

    # -- the fleet registry ---------------------------------------------------------------

    def processes(
        self,
        request: Request,
        viewer: Reader,
        include_all: Annotated[str, Query(alias="all")] = "",
    ) -> Response:
        """Every live process (with `all`, those of the last day too) and what it does now."""
        every = include_all.strip().lower() in ("1", "true", "yes", "on")
        fleet = self.ctx.app.admin.list_processes(every=every)
        warning = scheduler_warning(self.ctx.app.admin.list_schedules(), fleet)
        return render_page(
            request,
            viewer,
            "processes.html",
            processes=ordered(fleet),
            alive=len(fleet.alive),
            every=every,
            db_now=fleet.db_now,
            scheduler_warning=warning,
        )

    def _live(self) -> Fleet:
        return self.ctx.app.admin.list_processes()

    def _schedule_paused(self, request: Request, name: str, *, paused: bool) -> Response:
        admin = self.ctx.app.admin
        missing = f"There is no schedule named {fields.quoted(name)}"
        try:
            if paused:
                admin.pause_schedule(name)
            else:
                admin.resume_schedule(name)
        except ScheduleNotFound as exc:
            flash(request, "error", _sentence(missing + exc.suggestion))
        except ConfigError as exc:  # a name no schedule can have: say why too
            flash(request, "error", _sentence(f"{missing}: {exc}"))
        else:
            flash(request, "ok", f"{'Paused' if paused else 'Resumed'} schedule {name}")
        return see_other("/schedules")
