"""Dashboard sessions end: at logout (for every copy of the cookie), when the token that
opened them leaves the configuration, and a fixed time after sign-in however active they are."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.auth import SESSION_IDLE, SESSION_LIFETIME, TokenTable, server_sessions
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics
from tests.dashboard_forms import login
from tests.http.conftest import ADMIN, READER

SECRET = "shared-session-secret-0123456789abcdef"
START = 1_800_000_000.0  # seconds since the epoch, where the tests' clock starts


class Clock:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def server_for(app: chronoq.App, tokens: TokenTable, clock: Clock) -> FastAPI:
    server = create_server(HttpContext(app, tokens, Metrics(), secret=SECRET))
    server_sessions(server).clock = clock
    return server


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def browser(app: chronoq.App, clock: Clock) -> Iterator[TestClient]:
    tokens = TokenTable(admin=(ADMIN,), read=(READER,))
    with TestClient(server_for(app, tokens, clock)) as client:
        yield client


def replay(server: FastAPI, cookies: dict[str, str]) -> TestClient:
    """A client that kept a copy of a session's cookie."""
    return TestClient(server, cookies=cookies)


def paused(app: chronoq.App, queue: str) -> bool:
    return any(q.name == queue and q.paused for q in app.store.queue_list())


def test_a_cookie_kept_past_logout_no_longer_reads_or_acts(
    app: chronoq.App, browser: TestClient
) -> None:
    csrf = login(browser, ADMIN)
    kept = dict(browser.cookies)
    assert browser.post("/logout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    with replay(browser.app, kept) as thief:  # type: ignore[arg-type]
        assert thief.get("/jobs", follow_redirects=False).status_code == 303
        assert thief.get("/dashboard/overview.json").status_code == 401
        action = thief.post("/queues/pause", data={"csrf": csrf, "name": "emails"})
        assert action.status_code == 403
    assert not paused(app, "emails")


def test_a_session_ends_when_its_token_leaves_the_configuration(
    app: chronoq.App, clock: Clock
) -> None:
    """A restart with the same session secret but without the admin token that opened it."""
    before = server_for(app, TokenTable(admin=(ADMIN, "other-admin-0123456789abcdef")), clock)
    with TestClient(before) as client:
        csrf = login(client, ADMIN)
        kept = dict(client.cookies)
    after = server_for(app, TokenTable(admin=("other-admin-0123456789abcdef",)), clock)
    with replay(after, kept) as restarted:
        assert restarted.get("/jobs", follow_redirects=False).status_code == 303
        action = restarted.post("/queues/pause", data={"csrf": csrf, "name": "emails"})
        assert action.status_code == 403
    assert not paused(app, "emails")
    with replay(before, kept) as unchanged:  # the same cookie, where the token still is
        assert unchanged.get("/jobs", follow_redirects=False).status_code == 200


def test_a_session_takes_its_scope_from_its_token_now(app: chronoq.App, clock: Clock) -> None:
    """An admin token demoted to a read token: its session may still look, no longer act."""
    with TestClient(server_for(app, TokenTable(admin=(ADMIN,)), clock)) as client:
        csrf = login(client, ADMIN)
        kept = dict(client.cookies)
    with replay(server_for(app, TokenTable(read=(ADMIN,)), clock), kept) as demoted:
        assert demoted.get("/jobs", follow_redirects=False).status_code == 200
        action = demoted.post("/queues/pause", data={"csrf": csrf, "name": "emails"})
        assert action.status_code == 403
    assert not paused(app, "emails")


def test_an_active_session_ends_at_its_absolute_lifetime(browser: TestClient, clock: Clock) -> None:
    login(browser, READER)
    step = SESSION_IDLE / 2  # always active: never idle long enough to end that way
    while clock.now + step < START + SESSION_LIFETIME:
        clock.now += step
        assert browser.get("/jobs", follow_redirects=False).status_code == 200
    clock.now = START + SESSION_LIFETIME
    assert browser.get("/jobs", follow_redirects=False).status_code == 303
    login(browser, READER)  # a new session starts a new lifetime
    assert browser.get("/jobs", follow_redirects=False).status_code == 200


def test_an_idle_session_ends(browser: TestClient, clock: Clock) -> None:
    login(browser, READER)
    clock.now += SESSION_IDLE - 1
    assert browser.get("/jobs", follow_redirects=False).status_code == 200
    clock.now += SESSION_IDLE
    assert browser.get("/jobs", follow_redirects=False).status_code == 303


def test_the_cookie_holds_a_fingerprint_of_the_token_never_the_token(
    browser: TestClient,
) -> None:
    login(browser, ADMIN)
    [cookie] = browser.cookies.values()
    data = cookie.split(".")[0]
    contents = base64.b64decode(data + "=" * (-len(data) % 4)).decode()
    assert ADMIN not in contents and ADMIN[:8] not in contents
    assert server_sessions(browser.app).fingerprint(ADMIN) in contents  # type: ignore[arg-type]
