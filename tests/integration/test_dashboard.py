"""The dashboard through Starlette's TestClient on both stores: sessions and scopes, CSRF,
escaping of hostile names, every page, every action, and bad input that must never be a 500."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import itsdangerous
import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.core.jobs import JobProgress, JobStatus, Outcome
from chronoq.core.schedules import ScheduleSpec
from chronoq.http.auth import SESSION_COOKIE, TokenTable, server_sessions
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics
from chronoq.storage.base import JobClaimParams, JobFinishParams, JobLeaseRef, JobListParams
from tests.dashboard_forms import csrf_of, login

ADMIN = "admin-token-0123456789abcdef"
READER = "read-token-0123456789abcdef"
PAGES = ("/", "/jobs", "/running", "/dead", "/schedules")

HOSTILE_QUEUE = "<script>alert(1)</script>"
HOSTILE_TASK = "<img src=x onerror=alert(2)>"
HOSTILE_KEY = '"><b>key</b>'
HOSTILE_SCHEDULE = "<svg onload=alert(3)>"
HOSTILE_PAYLOAD = "</pre><script>alert(4)</script>"
HOSTILE_ERROR = "<iframe src=javascript:alert(5)>"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "jobs.py", line 1, in charge\n'
    "    raise ValueError(message)\n"
    f"ValueError: {HOSTILE_ERROR}\n"
)


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    # No task registered: the app then enqueues any task on any queue, hostile names included.
    with chronoq.App(dsn) as made:
        yield made


def client_for(app: chronoq.App, tokens: TokenTable) -> TestClient:
    return TestClient(create_server(HttpContext(app, tokens, Metrics())))


@pytest.fixture
def client(app: chronoq.App) -> Iterator[TestClient]:
    with client_for(app, TokenTable(admin=(ADMIN,), read=(READER,))) as made:
        yield made


@pytest.fixture
def admin(client: TestClient) -> str:
    return login(client, ADMIN)


def dead_job(app: chronoq.App, queue: str = "billing", task: str = "charge", **kw: object) -> int:
    """A job that failed its attempt and died, with a recorded error, as a worker leaves it."""
    job_id = app.enqueue(task, {"amount": 1, **kw}, queue=queue).id
    claimed = app.store.job_claim_with_wakeup(
        JobClaimParams(queues=[queue], limit=100, worker_id="w-1")
    ).jobs
    job = next(j for j in claimed if j.id == job_id)
    error = {
        "error": "ValueError",
        "message": HOSTILE_ERROR,
        "traceback": TRACEBACK,
        "worker": "w-1",
        "duration": 0.25,
        "outcome": "dead",
    }
    app.store.job_finish_many([JobFinishParams(job.id, job.lease_token, Outcome.DEAD, error=error)])
    return job_id


def status_of(app: chronoq.App, job_id: int) -> JobStatus | None:
    job = app.get_job(job_id)
    return job.status if job is not None else None


# -- sessions and scopes --------------------------------------------------------------------


def test_pages_send_strangers_to_the_login_form(client: TestClient) -> None:
    for path in (*PAGES, "/jobs/1"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/login?next=")
    assert client.get("/dashboard/overview.json").status_code == 401
    assert client.get("/dashboard/jobs/1.json").status_code == 401
    assert client.get("/jobs?status=dead").url.params["next"] == "/jobs?status=dead"


def test_an_admin_token_signs_in_and_sees_the_actions(client: TestClient, admin: str) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "Signed in (admin)" not in page.text  # the flash was shown once, on the first page
    assert "Sign out" in page.text
    assert admin == csrf_of(page)


def test_a_read_token_may_look_but_sees_no_action(app: chronoq.App, client: TestClient) -> None:
    dead_job(app)
    app.store.queue_pause("billing", False)
    pending = app.enqueue("charge", {}, queue="billing").id
    login(client, READER)
    for path in (*PAGES, f"/jobs/{pending}"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "read-only" in page.text
        for action in ("Pause", "Requeue", "Purge", "Cancel job", 'name="ids"'):
            assert action not in page.text, (path, action)


def test_a_wrong_token_is_refused(client: TestClient) -> None:
    form = client.get("/login")
    answer = client.post("/login", data={"csrf": csrf_of(form), "token": "x" * 30})
    assert answer.status_code == 401
    assert "Unknown token" in answer.text
    assert client.get("/", follow_redirects=False).status_code == 303


def test_the_login_form_needs_its_csrf_token(client: TestClient) -> None:
    client.get("/login")
    assert client.post("/login", data={"token": ADMIN}).status_code == 403
    assert client.post("/login", data={"token": ADMIN, "csrf": "forged"}).status_code == 403
    assert client.get("/", follow_redirects=False).status_code == 303


def test_login_returns_only_to_a_path_of_this_site(client: TestClient) -> None:
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        form = client.get("/login")
        answer = client.post(
            "/login",
            data={"csrf": csrf_of(form), "token": ADMIN, "next": target},
            follow_redirects=False,
        )
        assert answer.headers["location"] == "/"
        client.post("/logout", data={"csrf": csrf_of(client.get("/"))})


def test_login_starts_a_fresh_session(client: TestClient) -> None:
    before = csrf_of(client.get("/login"))
    after = login(client, ADMIN)
    assert before != after


def test_logout_ends_the_session(client: TestClient, admin: str) -> None:
    assert client.post("/logout", data={"csrf": "wrong"}).status_code == 403
    answer = client.post("/logout", data={"csrf": admin}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert client.get("/", follow_redirects=False).status_code == 303


def test_servers_sharing_a_session_secret_share_their_sessions(app: chronoq.App) -> None:
    """Several `chronoq serve` behind one address, with CHRONOQ_SESSION_SECRET set alike."""
    tokens, secret = TokenTable(admin=(ADMIN,)), "shared-session-secret-0123456789abcdef"
    servers = [
        create_server(HttpContext(app, tokens, Metrics(), secret=key))
        for key in (secret, secret, "another-session-secret-0123456789abcdef")
    ]
    with TestClient(servers[0]) as first:
        login(first, ADMIN)
        cookies = first.cookies
    with TestClient(servers[1], cookies=cookies) as second:
        assert second.get("/", follow_redirects=False).status_code == 200
    with TestClient(servers[2], cookies=cookies) as stranger:
        assert stranger.get("/", follow_redirects=False).status_code == 303


def test_a_cookie_is_worth_the_token_it_was_opened_with_not_the_scope_it_claims(
    app: chronoq.App,
) -> None:
    """A cookie that names a scope, as sessions once did, proves nothing: only the fingerprint
    of a configured token does, and the scope is that token's."""
    secret = "session-secret-0123456789abcdef"
    server = create_server(HttpContext(app, TokenTable(admin=(ADMIN,)), Metrics(), secret=secret))
    fingerprint = server_sessions(server).fingerprint
    now = int(time.time())

    def cookie(contents: dict[str, object]) -> str:
        # Signed as Starlette's session middleware signs: base64 JSON, timestamped.
        data = base64.b64encode(json.dumps({"csrf": "c" * 20, **contents}).encode())
        return itsdangerous.TimestampSigner(secret).sign(data).decode()

    opened = {"sid": "s" * 20, "opened": now, "seen": now}
    for contents, status in (
        ({**opened, "token": fingerprint(ADMIN)}, 200),
        ({**opened, "token": fingerprint("removed-token-0123456789abcdef")}, 303),
        ({"scope": 2}, 303),
        ({**opened, "token": fingerprint(ADMIN), "opened": "yesterday"}, 303),
    ):
        with TestClient(server, cookies={SESSION_COOKIE: cookie(contents)}) as browser:
            assert browser.get("/", follow_redirects=False).status_code == status, contents


def test_open_access_needs_no_login_and_says_so(app: chronoq.App) -> None:
    with client_for(app, TokenTable()) as client:
        for path in PAGES:
            page = client.get(path, follow_redirects=False)
            assert page.status_code == 200, path
            assert "open access: no tokens configured, loopback only" in page.text
            assert "Sign out" not in page.text
        assert client.get("/login", follow_redirects=False).status_code == 303


# -- CSRF and scope on actions --------------------------------------------------------------


def action_forms(app: chronoq.App) -> list[tuple[str, dict[str, object]]]:
    pending = app.enqueue("charge", {}, queue="billing").id
    dead = dead_job(app)
    app.add_schedule(ScheduleSpec.build(name="nightly", cadence="0 3 * * *", task="t", queue="q"))
    return [
        (f"/jobs/{pending}/cancel", {}),
        ("/dead/requeue", {"ids": [str(dead)]}),
        ("/dead/requeue", {"everything": "1"}),
        ("/dead/purge", {"ids": [str(dead)]}),
        ("/dead/purge", {"older_than": "0s"}),
        ("/queues/pause", {"name": "billing"}),
        ("/queues/resume", {"name": "billing"}),
        ("/schedules/pause", {"name": "nightly"}),
        ("/schedules/resume", {"name": "nightly"}),
    ]


def snapshot(app: chronoq.App) -> object:
    jobs = [(j.id, j.status) for j in app.store.job_list(JobListParams(limit=1000))]
    schedules = [(s.name, s.paused) for s in app.store.schedule_list()]
    queues = [(q.name, q.paused) for q in app.store.queue_list()]
    return jobs, schedules, queues


def test_actions_refuse_a_missing_or_wrong_csrf_token(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    forms = action_forms(app)
    before = snapshot(app)
    for path, fields in forms:
        assert client.post(path, data=fields).status_code == 403, path
        assert client.post(path, data={**fields, "csrf": admin[:-1]}).status_code == 403, path
        assert "CSRF" in client.post(path, data={**fields, "csrf": "x"}).text
    assert snapshot(app) == before


def test_read_scope_cannot_act(app: chronoq.App, client: TestClient) -> None:
    forms = action_forms(app)
    csrf = login(client, READER)
    before = snapshot(app)
    for path, fields in forms:
        answer = client.post(path, data={**fields, "csrf": csrf})
        assert answer.status_code == 403, path
        assert "admin token" in answer.text
    assert snapshot(app) == before


def test_strangers_cannot_act(app: chronoq.App, client: TestClient) -> None:
    forms = action_forms(app)
    csrf = csrf_of(client.get("/login"))  # a session, but no scope
    before = snapshot(app)
    for path, fields in forms:
        assert client.post(path, data={**fields, "csrf": csrf}).status_code == 403, path
    assert snapshot(app) == before


# -- escaping -------------------------------------------------------------------------------


def test_hostile_names_payloads_and_errors_render_as_text(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    dead = dead_job(app, queue=HOSTILE_QUEUE, task=HOSTILE_TASK, html=HOSTILE_PAYLOAD)
    live = app.enqueue(
        HOSTILE_TASK, {"html": HOSTILE_PAYLOAD}, queue=HOSTILE_QUEUE, key=HOSTILE_KEY
    )
    spec = ScheduleSpec.build(
        name=HOSTILE_SCHEDULE, cadence="every 1m", task=HOSTILE_TASK, queue=HOSTILE_QUEUE
    )
    app.add_schedule(spec)
    app.store.queue_pause(HOSTILE_QUEUE, True)
    hostile = (
        HOSTILE_QUEUE,
        HOSTILE_TASK,
        HOSTILE_KEY,
        HOSTILE_SCHEDULE,
        HOSTILE_PAYLOAD,
        HOSTILE_ERROR,
    )
    for path in (*PAGES, f"/jobs/{dead}", f"/jobs/{live.id}", f"/jobs?key={HOSTILE_KEY}"):
        page = client.get(path)
        assert page.status_code == 200, path
        for text in hostile:
            assert text not in page.text, (path, text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/").text
    assert "&lt;svg onload=alert(3)&gt;" in client.get("/schedules").text
    detail = client.get(f"/jobs/{dead}").text
    assert "&lt;iframe src=javascript:alert(5)&gt;" in detail
    assert "&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;" in detail


def test_flash_messages_are_escaped_too(app: chronoq.App, client: TestClient, admin: str) -> None:
    app.add_schedule(
        ScheduleSpec.build(name=HOSTILE_SCHEDULE, cadence="every 1m", task="t", queue="q")
    )
    page = client.post("/schedules/pause", data={"csrf": admin, "name": HOSTILE_SCHEDULE})
    assert "Paused schedule &lt;svg onload=alert(3)&gt;" in page.text
    assert HOSTILE_SCHEDULE not in page.text


# -- pages ----------------------------------------------------------------------------------


def test_every_page_renders_what_it_is_for(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    dead = dead_job(app)
    pending = app.enqueue("send", {"to": "a@example.com"}, queue="emails", key="welcome-1").id
    app.add_schedule(
        ScheduleSpec.build(
            name="nightly", cadence="0 3 * * *", task="send", queue="emails", zone="Europe/Paris"
        )
    )
    overview = client.get("/").text
    for text in ("billing", "emails", "Throughput", "Lateness", 'id="overview-data"'):
        assert text in overview
    jobs = client.get("/jobs").text
    assert f'href="/jobs/{dead}"' in jobs and f'href="/jobs/{pending}"' in jobs
    assert "welcome-1" in jobs
    dead_page = client.get("/dead").text
    assert f'name="ids" value="{dead}"' in dead_page and f'value="{pending}"' not in dead_page
    schedules = client.get("/schedules").text
    assert "nightly" in schedules and "0 3 * * *" in schedules and "Europe/Paris" in schedules
    assert re.search(r"\d{4}-\d\d-\d\d 03:00 \+0[12]:00<", schedules), "no upcoming fire time"


def test_the_schedules_table_scrolls_inside_its_card(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    """Structure only; tests/browser measures the table against its card in Chromium."""
    page = client.get("/schedules").text
    assert re.search(r'<section class="card">\s*<div class="table-scroll">\s*<table', page)
    css = client.get("/static/dashboard.css").text
    assert re.search(r"\.table-scroll \{[^}]*overflow-x: auto", css)
    assert re.search(r"\.grid \.wrap \{[^}]*overflow-wrap: anywhere", css)


def test_a_schedule_ticking_within_the_minute_shows_its_fire_times_to_the_second(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    for name, cadence in (("tens", "every 10s"), ("sixfield", "*/20 * * * * *")):
        app.add_schedule(
            ScheduleSpec.build(name=name, cadence=cadence, task="t", queue="q", zone="Asia/Tokyo")
        )
    page = client.get("/schedules").text
    for name in ("tens", "sixfield"):
        row = re.split(rf"<td[^>]*>{name}</td>", page, maxsplit=1)[1].split("</tr>", 1)[0]
        times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)? \+09:00", row)
        assert len(times) == 3 and len(set(times)) == 3, (name, times)
        assert all(re.fullmatch(r".* \d\d:\d\d:\d\d \+09:00", t) for t in times), times


def test_the_job_page_shows_every_attempt(app: chronoq.App, client: TestClient, admin: str) -> None:
    dead = dead_job(app)
    page = client.get(f"/jobs/{dead}").text
    assert "Attempt 1" in page and "ValueError" in page and "w-1" in page
    assert "250ms" in page  # the attempt's duration
    summary = page.split('<pre class="trace">')[1].split("</pre>")[0]
    assert "Traceback (most recent call last)" not in summary  # only the last lines
    assert "raise ValueError(message)" in summary
    assert "<details><summary>Full traceback</summary>" in page
    assert "Traceback (most recent call last)" in page.split("<details>")[1]
    assert "Lease token</dt><dd>1<" in page and "Fence rejections</dt><dd>0<" in page
    assert "&#34;amount&#34;: 1" in page  # the payload, pretty-printed
    assert "Cancel job" not in page  # a dead job cannot be cancelled


def test_the_overview_json_is_what_the_charts_draw(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    dead_job(app)
    data = client.get("/dashboard/overview.json").json()
    assert {"db_now", "queues", "throughput", "lateness_histogram"} <= set(data)
    (billing,) = data["queues"]
    assert billing["queue"] == "billing" and billing["dead"] == 1
    assert sum(point["dead"] for point in data["throughput"]) == 1


def test_the_live_job_json_reports_status_and_attempts(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    dead = dead_job(app)
    assert client.get(f"/dashboard/jobs/{dead}.json").json() == {
        "id": dead,
        "status": "dead",
        "attempts": 1,
        "progress": None,
        "progress_note": None,
    }
    assert client.get("/dashboard/jobs/0.json").status_code == 400
    assert client.get("/dashboard/jobs/999.json").status_code == 404
    too_long = client.get(f"/dashboard/jobs/{'9' * 5000}.json")
    assert too_long.status_code == 400 and "positive whole number" in too_long.json()["error"]


def test_job_search_filters(app: chronoq.App, client: TestClient, admin: str) -> None:
    dead = dead_job(app)
    mail = app.enqueue("send", {}, queue="emails", key="k-1").id
    other = app.enqueue("report", {}, queue="emails").id

    def found(**query: str) -> set[int]:
        page = client.get("/jobs", params=query)
        assert page.status_code == 200, query
        return {int(n) for n in re.findall(r'href="/jobs/(\d+)"', page.text)}

    assert found() == {dead, mail, other}
    assert found(status="dead") == {dead}
    assert found(queue="emails") == {mail, other}
    assert found(task="report") == {other}
    assert found(key="k-1") == {mail}
    now = datetime.now(UTC)
    assert found(created_after=(now - timedelta(hours=1)).isoformat()) == {dead, mail, other}
    assert found(created_before=(now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")) == set()
    assert found(created_after="2999-01-01") == set()


def test_job_search_pages_newest_first_by_cursor(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    ids = [r.id for r in app.enqueue_many(chronoq.JobSpec("t", {}) for _ in range(60))]
    first = client.get("/jobs").text
    shown = [int(n) for n in re.findall(r'href="/jobs/(\d+)"', first)]
    assert shown == sorted(ids, reverse=True)[:50]
    older = re.search(r'href="(/jobs\?before_id=\d+)">Older', first)
    assert older and older.group(1) == f"/jobs?before_id={shown[-1]}"
    second = client.get(older.group(1)).text
    assert [int(n) for n in re.findall(r'href="/jobs/(\d+)"', second)] == sorted(ids)[:10][::-1]
    assert "Older" not in second and "Newest" in second


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/jobs/abc", "job id must be a positive whole number"),
        ("/jobs/0", "job id must be a positive whole number"),
        ("/jobs/-3", "job id must be a positive whole number"),
        ("/jobs/99999999999999999999999", "job id must be a positive whole number"),
        ("/jobs/%EF%BC%91", "job id must be a positive whole number"),  # a full-width digit
        ("/jobs/" + "9" * 5000, "job id must be a positive whole number"),  # past int()'s digits
        ("/jobs?before_id=" + "9" * 5000, "before_id must be a positive whole number"),
        ("/jobs?created_after=yesterday", "created after must be a date"),
        ("/jobs?created_before=2026-13-01", "created before must be a date"),
        ("/jobs?status=lost", "status must be one of"),
        ("/jobs?before_id=x", "before_id must be a positive whole number"),
        ("/jobs?key=a%00b", "must not contain a NUL"),
        ("/jobs?queue=a%01b", "contains control characters"),
        ("/jobs?key=" + "k" * 1001, "key is 1001 characters long; the limit is 1000"),
        ("/dead?before_id=1.5", "before_id must be a positive whole number"),
        ("/dead?queue=%00", "must not contain a NUL"),
    ],
)
def test_bad_input_on_pages_is_a_message(
    client: TestClient, admin: str, path: str, message: str
) -> None:
    answer = client.get(path)
    assert answer.status_code == 400
    assert message in answer.text
    assert "<nav>" in answer.text  # the whole page, with its navigation


def test_a_missing_job_is_a_404_page(client: TestClient, admin: str) -> None:
    answer = client.get("/jobs/12345")
    assert answer.status_code == 404 and "There is no job 12345" in answer.text


def test_pages_forbid_framing_and_caching(client: TestClient, admin: str) -> None:
    headers = client.get("/").headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["cache-control"] == "no-store"
    assert headers["x-frame-options"] == "DENY"


def test_the_dashboard_stays_out_of_the_api_schema(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert not [path for path in paths if not path.startswith("/api/v1")]


def test_static_files_are_served(client: TestClient) -> None:
    assert "function drawThroughput" in client.get("/static/dashboard.js").text
    assert ".badge" in client.get("/static/dashboard.css").text


# -- actions --------------------------------------------------------------------------------


def test_cancel_a_pending_job(app: chronoq.App, client: TestClient, admin: str) -> None:
    job_id = app.enqueue("charge", {}, queue="billing").id
    answer = client.post(f"/jobs/{job_id}/cancel", data={"csrf": admin}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == f"/jobs/{job_id}"
    assert status_of(app, job_id) is JobStatus.CANCELLED
    page = client.get(f"/jobs/{job_id}").text
    assert f"Cancelled job {job_id}" in page and "Cancel job" not in page


def test_cancel_says_why_it_cannot(app: chronoq.App, client: TestClient, admin: str) -> None:
    dead = dead_job(app)
    page = client.post(f"/jobs/{dead}/cancel", data={"csrf": admin})
    assert f"Job {dead} is dead; only pending or running jobs can be cancelled" in page.text
    assert "There is no job 777" in client.post("/jobs/777/cancel", data={"csrf": admin}).text
    assert "positive whole number" in client.post("/jobs/x/cancel", data={"csrf": admin}).text
    assert status_of(app, dead) is JobStatus.DEAD


def test_requeue_the_selected_dead_jobs(app: chronoq.App, client: TestClient, admin: str) -> None:
    first, second, third = (dead_job(app) for _ in range(3))
    answer = client.post(
        "/dead/requeue",
        data={"csrf": admin, "ids": [str(first), str(third)], "back": "/dead?queue=billing"},
        follow_redirects=False,
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/dead?queue=billing"
    page = client.get(answer.headers["location"]).text
    assert f"Requeued 2 job(s): {first}, {third}" in page
    assert [status_of(app, j) for j in (first, second, third)] == [
        JobStatus.PENDING,
        JobStatus.DEAD,
        JobStatus.PENDING,
    ]


def test_requeue_all_dead_jobs_of_the_filter(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    billing = [dead_job(app) for _ in range(2)]
    webhook = dead_job(app, queue="webhooks", task="call")
    page = client.post("/dead/requeue", data={"csrf": admin, "everything": "1", "queue": "billing"})
    assert "Requeued 2 job(s)" in page.text
    assert [status_of(app, j) for j in billing] == [JobStatus.PENDING] * 2
    assert status_of(app, webhook) is JobStatus.DEAD
    client.post("/dead/requeue", data={"csrf": admin, "everything": "1", "task": "call"})
    assert status_of(app, webhook) is JobStatus.PENDING


def test_purge_the_selected_dead_jobs(app: chronoq.App, client: TestClient, admin: str) -> None:
    first, second = dead_job(app), dead_job(app)
    page = client.post("/dead/purge", data={"csrf": admin, "ids": [str(first)]})
    assert "Purged 1 dead job(s)" in page.text
    assert status_of(app, first) is None and status_of(app, second) is JobStatus.DEAD


def test_purge_dead_jobs_older_than_an_age(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    billing, webhook = dead_job(app), dead_job(app, queue="webhooks")
    page = client.post("/dead/purge", data={"csrf": admin, "older_than": "7d"})
    assert "Purged 0 dead job(s)" in page.text
    client.post("/dead/purge", data={"csrf": admin, "older_than": "0s", "queue": "webhooks"})
    assert status_of(app, billing) is JobStatus.DEAD and status_of(app, webhook) is None


@pytest.mark.parametrize(
    ("path", "fields", "message"),
    [
        ("/dead/purge", {"older_than": "a week"}, "invalid duration"),
        ("/dead/purge", {"older_than": "-1d"}, "must not be negative"),
        ("/dead/purge", {}, "Select at least one dead job, or give an age"),
        ("/dead/requeue", {}, "Select at least one dead job first"),
        ("/dead/requeue", {"ids": ["1", "two"]}, "job id must be a positive whole number"),
        ("/dead/purge", {"ids": ["0"]}, "job id must be a positive whole number"),
        ("/dead/purge", {"ids": ["9" * 5000]}, "job id must be a positive whole number"),
        ("/dead/purge", {"older_than": "1e400"}, "longer than 100 years"),
        ("/dead/requeue", {"everything": "1", "queue": "a\x00"}, "must not contain a NUL"),
        ("/queues/pause", {"name": ""}, "queue name must be a non-empty string"),
        ("/queues/pause", {"name": "a\x01b"}, "contains control characters"),
        ("/schedules/pause", {"name": "nope"}, "There is no schedule named"),
        ("/schedules/resume", {"name": "a\x00"}, "There is no schedule named"),
    ],
)
def test_bad_input_on_actions_is_a_message(
    app: chronoq.App,
    client: TestClient,
    admin: str,
    path: str,
    fields: dict[str, object],
    message: str,
) -> None:
    dead = dead_job(app)
    answer = client.post(path, data={"csrf": admin, **fields}, follow_redirects=False)
    assert answer.status_code == 303
    page = client.get(answer.headers["location"])
    assert page.status_code == 200
    assert message in page.text
    assert status_of(app, dead) is JobStatus.DEAD


def test_actions_go_back_only_to_this_site(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    answer = client.post(
        "/dead/purge",
        data={"csrf": admin, "older_than": "7d", "back": "https://evil.example/"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == "/dead"


def test_pause_and_resume_a_queue(app: chronoq.App, client: TestClient, admin: str) -> None:
    app.enqueue("charge", {}, queue="billing")
    page = client.post("/queues/pause", data={"csrf": admin, "name": "billing"})
    assert "Paused queue billing" in page.text and "Resume" in page.text
    assert app.store.queue_get("billing").paused
    page = client.post("/queues/resume", data={"csrf": admin, "name": "billing"})
    assert "Resumed queue billing" in page.text
    assert not app.store.queue_get("billing").paused


def test_pause_and_resume_a_schedule(app: chronoq.App, client: TestClient, admin: str) -> None:
    app.add_schedule(ScheduleSpec.build(name="nightly", cadence="0 3 * * *", task="t", queue="q"))
    page = client.post("/schedules/pause", data={"csrf": admin, "name": "nightly"})
    assert "Paused schedule nightly" in page.text and "Resume" in page.text
    stored = app.store.schedule_get("nightly")
    assert stored is not None and stored.paused
    client.post("/schedules/resume", data={"csrf": admin, "name": "nightly"})
    stored = app.store.schedule_get("nightly")
    assert stored is not None and not stored.paused


# -- output and progress ----------------------------------------------------------------------


def running_job(app: chronoq.App, queue: str = "files", task: str = "copy") -> tuple[int, int]:
    """A job claimed by a worker: its id and lease token."""
    job_id = app.enqueue(task, {}, queue=queue).id
    claimed = app.store.job_claim_with_wakeup(
        JobClaimParams(queues=[queue], limit=100, worker_id="w-1")
    ).jobs
    job = next(j for j in claimed if j.id == job_id)
    return job_id, job.lease_token


def test_the_running_page_lists_running_jobs_with_their_progress(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    reporting, token = running_job(app)
    silent, _ = running_job(app, queue="other", task=HOSTILE_TASK)
    pending = app.enqueue("copy", {}, queue="files").id
    progress = {reporting: JobProgress(0.4, HOSTILE_PAYLOAD)}
    app.store.job_heartbeat_many([JobLeaseRef(reporting, token)], progress)
    page = client.get("/running")
    assert page.status_code == 200
    assert f'href="/jobs/{reporting}"' in page.text and f'href="/jobs/{silent}"' in page.text
    assert f'href="/jobs/{pending}"' not in page.text
    assert '<progress max="1" value="0.4">40%</progress> 40%' in page.text
    assert "&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;" in page.text
    assert "not reported" in page.text
    for hostile in (HOSTILE_PAYLOAD, HOSTILE_TASK):
        assert hostile not in page.text
    only_files = client.get("/running?queue=files").text
    assert f'href="/jobs/{reporting}"' in only_files and f'href="/jobs/{silent}"' not in only_files
    detail = client.get(f"/jobs/{reporting}").text
    assert 'id="job-progress"' in detail and "40%" in detail
    assert 'data-progress="0.4"' in detail
    assert client.get(f"/dashboard/jobs/{reporting}.json").json()["progress"] == 0.4


def test_the_running_page_refuses_a_bad_filter_without_a_500(
    client: TestClient, admin: str
) -> None:
    assert client.get("/running?queue=" + "q" * 5000).status_code == 400
    assert client.get("/running?before_id=seven").status_code == 400


def test_a_done_jobs_page_shows_its_output_as_text(
    app: chronoq.App, client: TestClient, admin: str
) -> None:
    job_id, token = running_job(app)
    output = json.dumps({"html": HOSTILE_PAYLOAD, "rows": [1, 2]})
    app.store.job_finish_many([JobFinishParams(job_id, token, Outcome.DONE, output_json=output)])
    page = client.get(f"/jobs/{job_id}").text
    assert 'id="job-output"' in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;" in page
    assert HOSTILE_PAYLOAD not in page
    quiet, quiet_token = running_job(app)
    app.store.job_finish_many([JobFinishParams(quiet, quiet_token, Outcome.DONE)])
    assert "The handler returned nothing." in client.get(f"/jobs/{quiet}").text
    pending = app.enqueue("copy", {}, queue="files").id
    assert 'id="job-output"' not in client.get(f"/jobs/{pending}").text
