"""The dashboard's Processes page and its no-scheduler warning, through Starlette's TestClient
on both stores: live and ended processes, an empty fleet, escaping, sign-in, the CSP, and the
warning on the overview, schedules and processes pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.fleet.records import ProcessInfo
from chronoq.http.auth import TokenTable
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics
from chronoq.storage.base import ProcessBeatParams
from tests.dashboard_forms import login
from tests.integration.test_schedules import rewind

READER = "read-token-0123456789abcdef"
HOSTILE_HOST = "<script>alert(1)</script>"
HOSTILE_QUEUE = "<img src=x onerror=alert(2)>"
WARNING = re.compile(r'<p class="flash warning" role="alert" id="no-scheduler">(.*?)</p>', re.S)


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    with chronoq.App(dsn) as made:
        made.migrate()
        yield made


@pytest.fixture
def client(app: chronoq.App) -> Iterator[TestClient]:
    server = create_server(HttpContext(app, TokenTable(read=(READER,)), Metrics()))
    with TestClient(server) as made:
        login(made, READER)
        yield made


def _beat(
    app: chronoq.App, pid: int, kind: str = "worker", *, ago: float = 0, **fields: Any
) -> str:
    values: dict[str, Any] = {
        "id": f"web-{pid}:{pid}:abc",
        "kind": kind,
        "host": f"web-{pid}",
        "pid": pid,
        "version": "1.2.3",
    } | fields
    now = app.store.db_now() - timedelta(seconds=ago)
    app.store.process_beat(ProcessBeatParams(ProcessInfo(**values), ttl=30, now=now))
    return str(values["id"])


def _rows(page: str) -> list[str]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr[^>]*>.*?</tr>", body, re.S)


def _warning(client: TestClient, path: str) -> str | None:
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = WARNING.search(page.text)
    return found.group(1) if found else None


def test_an_empty_fleet_renders_and_says_how_processes_get_there(client: TestClient) -> None:
    page = client.get("/processes")
    assert page.status_code == 200
    (row,) = _rows(page.text)
    assert 'class="empty"' in row and "No process is alive." in row
    assert "<code>chronoq worker</code>" in row
    assert '<a href="/processes" class="current" aria-current="page">Processes</a>' in page.text
    every = client.get("/processes?all=1")
    assert "No process recorded itself in the last day." in every.text


def test_live_processes_with_what_they_do(client: TestClient, app: chronoq.App) -> None:
    _beat(app, 1, queues=("emails", "sms"), concurrency=8, running=3)
    _beat(app, 2, "scheduler", duties=("scheduler", "partition:0"))
    _beat(app, 3, ago=60)  # expired: not live
    page = client.get("/processes").text
    worker, scheduler = _rows(page)
    assert 'data-process="web-1:1:abc"' in worker
    assert "web-1 / 1" in worker and "1.2.3" in worker
    assert '<a href="/jobs?queue=emails">emails</a>, <a href="/jobs?queue=sms">sms</a>' in worker
    assert re.search(
        r'<td class="num"><a href="/jobs\?status=running">3</a></td>\s*'
        r'<td class="num">8</td>',
        worker,
    )
    assert re.search(r"\d+(\.\d)?(ms|s) ago", worker)
    assert '<span class="badge duty">scheduler</span>' in scheduler
    assert '<span class="badge duty">partition:0</span>' in scheduler
    assert "2 alive" in page and "State" not in page


def test_all_shows_the_processes_that_ended_with_their_state(
    client: TestClient, app: chronoq.App
) -> None:
    _beat(app, 1)
    app.store.process_stop(_beat(app, 2))
    _beat(app, 3, ago=60)
    page = client.get("/processes?all=1").text
    states = [re.search(r'class="badge (\w+)"', row).group(1) for row in _rows(page)]  # type: ignore[union-attr]
    assert states == ["alive", "stopped", "gone"]
    assert "3 of the last day, 1 alive" in page
    assert '<a href="/processes">Live only</a>' in page


def test_names_a_process_reports_render_as_text(client: TestClient, app: chronoq.App) -> None:
    _beat(app, 1, host=HOSTILE_HOST, queues=(HOSTILE_QUEUE,), version="<b>9</b>")
    page = client.get("/processes").text
    for hostile in (HOSTILE_HOST, HOSTILE_QUEUE, "<b>9</b>"):
        assert hostile not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_page_needs_a_session_and_runs_no_inline_script(app: chronoq.App) -> None:
    server = create_server(HttpContext(app, TokenTable(read=(READER,)), Metrics()))
    with TestClient(server) as stranger:
        answer = stranger.get("/processes?all=1", follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/login?next=")
        login(stranger, READER)
        page = stranger.get("/processes")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/static/dashboard.js" defer>']


# -- the no-scheduler warning ------------------------------------------------------------------


def _schedule(app: chronoq.App, name: str = "nightly", cadence: str = "0 3 * * *") -> None:
    spec = app.schedule_spec(name=name, cadence=cadence, task="cleanup", queue="default")
    app.add_schedule(spec)


def test_no_warning_without_schedules(client: TestClient) -> None:
    for path in ("/", "/schedules", "/processes"):
        assert _warning(client, path) is None


def test_active_schedules_without_a_scheduler_are_warned_of_on_every_page(
    client: TestClient, app: chronoq.App
) -> None:
    _schedule(app)
    for path in ("/", "/schedules", "/processes"):
        assert _warning(client, path) == (
            "No scheduler is running: 1 active schedule will not fire until one runs; start "
            '<code>chronoq scheduler --app MODULE:APP</code>. <a href="/processes">Processes</a>'
        )


def test_a_live_scheduler_or_paused_schedules_mean_no_warning(
    client: TestClient, app: chronoq.App
) -> None:
    _schedule(app)
    scheduler = _beat(app, 9, "scheduler")
    assert _warning(client, "/") is None
    app.store.process_stop(scheduler)
    assert _warning(client, "/") is not None
    app.store.schedule_pause("nightly", True)
    assert _warning(client, "/schedules") is None


def test_overdue_schedules_are_marked(client: TestClient, app: chronoq.App) -> None:
    _schedule(app, "every-minute", "* * * * *")
    _schedule(app, "nightly")
    rewind(app, "every-minute", app.store.db_now() - timedelta(minutes=30))
    warning = _warning(client, "/schedules")
    assert warning is not None
    assert warning.startswith("No scheduler is running: 1 schedule is overdue (the oldest by 29m")
    rows = _rows(client.get("/schedules").text)
    marked = {
        "every-minute" in row: '<span class="badge dead">overdue</span>' in row for row in rows
    }
    assert marked == {True: True, False: False}
    _beat(app, 9, "scheduler")
    assert "overdue" not in client.get("/schedules").text
