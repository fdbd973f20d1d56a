"""Failed authentications are throttled per client address and logged, never with the token:
wrong logins at `/login` and wrong or missing bearer tokens on the API. Bounded local traffic:
a dozen requests per client, on a clock the tests move."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx2 import Response

import chronoq
from chronoq.http.auth import (
    THROTTLE_BUDGET,
    THROTTLE_WINDOW,
    Throttle,
    TokenTable,
    server_throttle,
)
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics
from tests.dashboard_forms import csrf_of
from tests.http.conftest import ADMIN, READER

WRONG = "wrong-token-guessed-0123456789"
ATTACKER, NEIGHBOUR = ("10.0.0.66", 40000), ("10.0.0.7", 40000)
ONE_TRY = THROTTLE_WINDOW / THROTTLE_BUDGET  # seconds in which an address regains a try


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(app: chronoq.App, clock: Clock) -> FastAPI:
    tokens = TokenTable(admin=(ADMIN,), read=(READER,))
    made = create_server(HttpContext(app, tokens, Metrics()))
    server_throttle(made).clock = clock
    return made


@pytest.fixture
def attacker(server: FastAPI) -> Iterator[TestClient]:
    with TestClient(server, client=ATTACKER) as client:
        yield client


def try_login(client: TestClient, token: str) -> Response:
    form = client.get("/login")
    data = {"csrf": csrf_of(form), "token": token, "next": "/jobs"}
    return client.post("/login", data=data, follow_redirects=False)


def stats(client: TestClient, token: str | None) -> Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get("/api/v1/stats", headers=headers)


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == "auth.failed"]


def test_a_burst_of_wrong_logins_is_throttled_even_for_the_right_token(
    server: FastAPI, attacker: TestClient, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chronoq.http.auth")
    for _ in range(THROTTLE_BUDGET):
        assert try_login(attacker, WRONG).status_code == 401
    throttled = try_login(attacker, WRONG)
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) == ONE_TRY
    assert "Too many failed sign-ins from your address" in throttled.text
    assert try_login(attacker, ADMIN).status_code == 429  # not even looked at
    assert attacker.get("/jobs", follow_redirects=False).status_code == 303
    assert len(failures(caplog)) == THROTTLE_BUDGET  # throttled tries are not logged

    with TestClient(server, client=NEIGHBOUR) as neighbour:
        assert try_login(neighbour, ADMIN).status_code == 303

    clock.now += ONE_TRY - 1
    assert try_login(attacker, ADMIN).status_code == 429
    clock.now += 1
    assert try_login(attacker, ADMIN).status_code == 303
    assert attacker.get("/jobs", follow_redirects=False).status_code == 200


def test_failed_logins_are_logged_with_address_route_and_reason_never_the_token(
    attacker: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chronoq.http.auth")
    try_login(attacker, WRONG)
    try_login(attacker, "")
    [unknown, empty] = failures(caplog)
    for record in (unknown, empty):
        line = record.getMessage()
        assert record.levelno == logging.WARNING
        assert ATTACKER[0] in line and "POST /login" in line
        assert WRONG[:6] not in caplog.text and WRONG[-6:] not in caplog.text
    assert unknown.getMessage().endswith("unknown token")
    assert empty.getMessage().endswith("no token")


def test_a_burst_of_wrong_bearer_tokens_is_throttled_even_for_the_right_token(
    server: FastAPI, attacker: TestClient, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chronoq.http.auth")
    for _ in range(THROTTLE_BUDGET - 1):
        assert stats(attacker, WRONG).status_code == 401
    assert stats(attacker, None).status_code == 401  # no token counts too
    throttled = stats(attacker, WRONG)
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) == ONE_TRY
    error = throttled.json()["error"]
    assert error["type"] == "TooManyRequests" and "too many failed" in error["message"]
    assert stats(attacker, READER).status_code == 429

    records = failures(caplog)
    assert len(records) == THROTTLE_BUDGET
    assert all("GET /api/v1/stats" in r.getMessage() for r in records)
    assert all(ATTACKER[0] in r.getMessage() for r in records)
    assert records[-1].getMessage().endswith("no bearer token")
    assert WRONG[:6] not in caplog.text and READER[:6] not in caplog.text

    with TestClient(server, client=NEIGHBOUR) as neighbour:
        assert stats(neighbour, READER).status_code == 200

    clock.now += ONE_TRY
    assert stats(attacker, READER).status_code == 200


def enqueue(client: TestClient, token: str | None) -> Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/api/v1/jobs", json={"task": "greet"}, headers=headers)


def test_bodies_refused_unread_for_a_bad_token_count_and_are_throttled_too(
    server: FastAPI, attacker: TestClient, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A request with a body and no known token is refused before its body is read, ahead of
    the routes: it is counted, logged and throttled there all the same."""
    caplog.set_level(logging.WARNING, logger="chronoq.http.auth")
    for _ in range(THROTTLE_BUDGET - 1):
        assert enqueue(attacker, WRONG).status_code == 401
    assert enqueue(attacker, None).status_code == 401
    throttled = enqueue(attacker, ADMIN)
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) == ONE_TRY
    assert throttled.json()["error"]["type"] == "TooManyRequests"
    assert stats(attacker, READER).status_code == 429  # the routes see the same budget

    records = failures(caplog)
    assert len(records) == THROTTLE_BUDGET
    assert all("POST /api/v1/jobs" in r.getMessage() for r in records)
    assert records[0].getMessage().endswith("unknown token")
    assert records[-1].getMessage().endswith("no bearer token")
    assert WRONG[:6] not in caplog.text and ADMIN[:6] not in caplog.text

    clock.now += ONE_TRY
    assert enqueue(attacker, ADMIN).status_code != 429


def test_the_right_token_costs_no_try(attacker: TestClient) -> None:
    for _ in range(3 * THROTTLE_BUDGET):
        assert stats(attacker, READER).status_code == 200
    assert stats(attacker, "").status_code == 401


def test_an_open_server_throttles_nobody(app: chronoq.App) -> None:
    with TestClient(create_server(HttpContext(app, TokenTable(), Metrics()))) as client:
        for _ in range(THROTTLE_BUDGET + 1):
            assert stats(client, WRONG).status_code == 200


def test_the_throttle_tracks_a_bounded_number_of_addresses() -> None:
    clock = Clock()
    throttle = Throttle(budget=1, window=60.0, max_clients=3, clock=clock)
    for host in range(10):
        throttle.failed(f"10.0.1.{host}")
    assert len(throttle._buckets) == 3
    assert throttle.wait("10.0.1.9") == pytest.approx(60.0)
    assert throttle.wait("10.0.1.0") == 0  # forgotten: the oldest failure went first


def test_tries_grow_back_but_never_past_the_budget() -> None:
    clock = Clock()
    throttle = Throttle(budget=2, window=10.0, clock=clock)
    throttle.failed("a")
    clock.now += 1000  # a long quiet spell saves up no more than the budget
    throttle.failed("a")
    throttle.failed("a")
    assert throttle.wait("a") == pytest.approx(5.0)
    clock.now += 5
    assert throttle.wait("a") == 0
