"""`/metrics` asks for a token (or a dashboard session) once tokens are configured."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.auth import TokenTable
from tests.http.conftest import ADMIN, READER, make_client

METRIC = "chronoq_queue_depth"


@pytest.fixture
def stranger(app: chronoq.App) -> Iterator[TestClient]:
    """A client of a server with tokens, sending none of its own."""
    with make_client(app, TokenTable(admin=(ADMIN,), read=(READER,))) as client:
        yield client


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_metrics_refuse_a_client_without_a_token(stranger: TestClient) -> None:
    answer = stranger.get("/metrics")
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "Unauthorized"
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert METRIC not in answer.text


def test_metrics_refuse_a_wrong_token(stranger: TestClient) -> None:
    answer = stranger.get("/metrics", headers=_bearer("x" * 30))
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "InvalidToken"


@pytest.mark.parametrize("token", [READER, ADMIN])
def test_metrics_answer_a_read_or_admin_token(stranger: TestClient, token: str) -> None:
    answer = stranger.get("/metrics", headers=_bearer(token))
    assert answer.status_code == 200
    assert METRIC in answer.text


def test_metrics_answer_a_signed_in_dashboard_session(stranger: TestClient) -> None:
    form = stranger.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    stranger.post("/login", data={"csrf": csrf[1], "token": READER}, follow_redirects=False)
    answer = stranger.get("/metrics")
    assert answer.status_code == 200
    assert METRIC in answer.text


def test_metrics_stay_open_on_an_open_server(app: chronoq.App) -> None:
    with make_client(app, TokenTable()) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert METRIC in answer.text
