"""A schedule name is one segment of its URL (/schedules/NAME): one with '/' is refused where a
schedule is made (`App.schedule`, `chronoq schedule add`), and the API says why it cannot route
one rather than answering 'not found'."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import chronoq
from chronoq.errors import ConfigError
from chronoq.http.auth import TokenTable
from tests.http.conftest import ADMIN, make_app, make_client
from tests.integration.cli_support import run_cli

REFUSED = "schedule name 'reports/daily' contains '/'"


@pytest.fixture
def app(sqlite_dsn: str) -> Iterator[chronoq.App]:
    made = make_app(sqlite_dsn)
    made.sync()
    yield made
    made.close()


def test_app_schedule_refuses_a_slash_and_says_what_is_allowed(app: chronoq.App) -> None:
    with pytest.raises(ConfigError, match=REFUSED) as refused:
        app.schedule("0 9 * * *", "cleanup", name="reports/daily")
    assert "any printable character except '/'" in str(refused.value)
    assert "'reports-daily'" in str(refused.value)
    assert "reports/daily" not in app.schedules


@pytest.mark.parametrize("name", [".", ".."])
def test_app_schedule_refuses_the_dot_segments(app: chronoq.App, name: str) -> None:
    with pytest.raises(ConfigError, match="cannot be a URL path segment"):
        app.schedule("0 9 * * *", "cleanup", name=name)


def test_app_schedule_refuses_a_task_name_with_a_slash_as_the_default_name(
    app: chronoq.App,
) -> None:
    app.task(lambda: None, name="reports/daily")
    with pytest.raises(ConfigError, match=REFUSED):
        app.schedule("0 9 * * *", "reports/daily")
    app.schedule("0 9 * * *", "reports/daily", name="reports-daily")  # named otherwise, it is fine


def test_schedule_add_refuses_a_slash(app: chronoq.App, sqlite_dsn: str) -> None:
    added = run_cli(
        "schedule", "add", "reports/daily", "0 9 * * *", "--task", "x", "--dsn", sqlite_dsn
    )
    assert added.code == 2, added.err
    assert added.err.startswith(f"error: {REFUSED};")
    assert [s.name for s in app.store.schedule_list()] == ["nightly"]
    # One stored before such names were refused can still be looked up and removed.
    removed = run_cli("schedule", "remove", "reports/daily", "--dsn", sqlite_dsn)
    assert removed.code == 1 and "no schedule named 'reports/daily'" in removed.err


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/schedules/reports%2Fdaily"),
        ("GET", "/api/v1/schedules/reports%2fdaily"),
        ("POST", "/api/v1/schedules/reports%2Fdaily/pause"),
        ("POST", "/api/v1/schedules/reports%2Fdaily/trigger"),
    ],
)
def test_the_api_says_why_a_name_with_a_slash_has_no_route(
    app: chronoq.App, method: str, path: str
) -> None:
    with make_client(app, TokenTable(admin=(ADMIN,))) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN}"
        response = client.request(method, path)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "name" and error["message"].startswith(REFUSED)


def test_the_api_still_answers_not_found_for_other_unknown_paths(app: chronoq.App) -> None:
    with make_client(app, TokenTable(admin=(ADMIN,))) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN}"
        assert client.get("/api/v1/schedules/nightly/extra").status_code == 404
        assert client.get("/api/v1/schedules/no%20such").status_code == 404
