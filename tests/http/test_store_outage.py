"""A database outage: clients hear "database unavailable", the server log hears the rest."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.auth import TokenTable
from tests.http.conftest import ADMIN, make_client

PASSWORD = "hunter2-outage"
DATABASE = "outage_db"


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def outage() -> Iterator[TestClient]:
    """A server whose PostgreSQL refuses every connection: the store's real error."""
    dsn = f"postgresql://chronoq_user:{PASSWORD}@127.0.0.1:{_closed_port()}/{DATABASE}"
    app = chronoq.App(dsn)
    with make_client(app, TokenTable(admin=(ADMIN,))) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN}"
        yield client
    app.close()


def _sign_in(client: TestClient) -> None:
    form = client.get("/login")
    csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    answer = client.post("/login", data={"csrf": csrf, "token": ADMIN}, follow_redirects=False)
    assert answer.status_code == 303


def _says_nothing_of_the_database(text: str) -> None:
    for detail in ("chronoq_user", PASSWORD, DATABASE, "127.0.0.1", "postgresql://", "5432"):
        assert detail not in text


def test_the_api_says_only_that_the_database_is_unavailable(
    outage: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chronoq.http"):
        answer = outage.get("/api/v1/jobs")
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert (error["type"], error["message"]) == ("StoreUnavailable", "database unavailable")
    _says_nothing_of_the_database(answer.text)
    logged = [r for r in caplog.records if r.name == "chronoq.http"]
    assert logged and logged[0].levelno == logging.WARNING
    assert "chronoq_user:***@127.0.0.1" in logged[0].getMessage()
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("path", ["/", "/jobs", "/schedules"])
def test_a_dashboard_page_answers_an_html_page(
    outage: TestClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    _sign_in(outage)
    with caplog.at_level(logging.WARNING, logger="chronoq.http"):
        answer = outage.get(path, headers={"Accept": "text/html"})
    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith("text/html")
    assert "Database unavailable" in answer.text
    assert "Content-Security-Policy" in answer.headers
    _says_nothing_of_the_database(answer.text)
    assert "chronoq_user:***@127.0.0.1" in caplog.text
    assert PASSWORD not in caplog.text


def test_the_data_a_page_polls_answers_json(outage: TestClient) -> None:
    _sign_in(outage)
    answer = outage.get("/dashboard/overview.json")
    assert answer.status_code == 503
    assert answer.json() == {"error": "database unavailable"}
