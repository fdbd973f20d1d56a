"""What the server does before a route sees a request: JSON past what the decoder takes, bodies
refused before they are read, and redirects that never name a host the client chose."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

import chronoq
from chronoq.http.auth import Throttle, TokenTable
from chronoq.http.limits import BodyLimit, BodyLimits
from chronoq.http.redirects import relative_to
from chronoq.storage.base import JobListParams

from .conftest import ADMIN

JSON = {"Content-Type": "application/json"}
DEEP = 1_000_000
LONG_NUMBER = "9" * 5_000


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _job_with(payload: bytes) -> bytes:
    return b'{"task": "cleanup", "payload": {"n": ' + payload + b"}}"


def _batch_with(payload: bytes) -> bytes:
    return b'{"jobs": [' + _job_with(payload) + b"]}"


def _malformed(response: Any) -> str:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "MalformedJSON", error
    message: str = error["message"]
    return message


def _nothing_stored(app: chronoq.App) -> bool:
    return app.store.job_list(JobListParams(limit=10)) == []


@pytest.mark.parametrize("depth", [1_000, DEEP])
@pytest.mark.parametrize(
    ("path", "body"), [("/api/v1/jobs", _job_with), ("/api/v1/jobs/batch", _batch_with)]
)
def test_json_nested_too_deep_is_malformed(
    client: TestClient, app: chronoq.App, path: str, body: Any, depth: int
) -> None:
    response = client.post(path, content=body(_nested(depth)), headers=JSON)
    assert "nested too deep" in _malformed(response)
    assert _nothing_stored(app)


@pytest.mark.parametrize(
    ("path", "body"), [("/api/v1/jobs", _job_with), ("/api/v1/jobs/batch", _batch_with)]
)
def test_a_number_too_long_is_malformed(
    client: TestClient, app: chronoq.App, path: str, body: Any
) -> None:
    response = client.post(path, content=body(LONG_NUMBER.encode()), headers=JSON)
    assert "number too long" in _malformed(response)
    assert _nothing_stored(app)


JSON_BODIES = [
    "/api/v1/jobs",
    "/api/v1/jobs/batch",
    "/api/v1/dead/requeue",
    "/api/v1/dead/purge",
    "/api/v1/queues/emails/pause",
]


@pytest.mark.parametrize("path", JSON_BODIES)
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'{"task": "cleanup",',
            "not valid JSON: Expecting property name enclosed in double quotes at character 19",
        ),
        (b'{"task": "cl\xffean"}', "not valid JSON: byte 0xff at byte 12 is not UTF-8"),
        (_nested(DEEP), "nested too deep"),
    ],
    ids=["syntax", "not-utf8", "deep"],
)
def test_a_body_that_is_not_json_is_named_as_the_body(
    client: TestClient, app: chronoq.App, path: str, body: bytes, reason: str
) -> None:
    response = client.post(path, content=body, headers=JSON)
    assert reason in _malformed(response)
    assert response.json()["error"]["field"] == "body"
    assert _nothing_stored(app)
    assert not app.store.queue_get("emails").paused


@pytest.mark.parametrize("path", ["/static", "/api/v1/jobs/", "/jobs/", "/login/"])
def test_no_redirect_names_the_host_the_client_sent(client: TestClient, path: str) -> None:
    response = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    location = response.headers["location"]
    assert response.status_code == 307
    assert location.startswith("/") and "evil.example" not in location, location


def test_static_redirects_to_its_own_path(client: TestClient) -> None:
    response = client.get("/static", headers={"Host": "evil.example"}, follow_redirects=False)
    assert response.headers["location"] == "/static/"


@pytest.mark.parametrize(
    ("location", "relative"),
    [
        ("http://evil.example/static/", "/static/"),
        ("http://evil.example//other.example/", "/other.example/"),
        ("http://evil.example/\\other.example/?a=1", "/other.example/?a=1"),
        ("/jobs?page=2", "/jobs?page=2"),
        ("https://docs.example/x", "https://docs.example/x"),
    ],
)
def test_relative_to_never_leaves_another_host_in_the_location(
    location: str, relative: str
) -> None:
    assert relative_to(location, "evil.example") == relative


# -- body limits -------------------------------------------------------------------------------

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _sign_in(client: TestClient) -> str:
    form = client.get("/login")
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found
    answer = client.post("/login", data={"csrf": found.group(1), "token": ADMIN, "next": "/jobs"})
    found = re.search(r'name="csrf" value="([^"]+)"', answer.text)
    assert answer.url.path == "/jobs" and found
    return found.group(1)


def test_the_login_form_takes_a_small_body_only(client: TestClient) -> None:
    response = client.post("/login", content=b"token=" + b"x" * (32 * 1024), headers=FORM)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "RequestTooLarge"


def test_a_signed_in_session_may_send_a_larger_form(client: TestClient) -> None:
    csrf = _sign_in(client)
    padded = {"csrf": csrf, "padding": "x" * (32 * 1024)}
    assert client.post("/logout", data=padded).status_code != 413


class _Asgi:
    """BodyLimit alone, in front of an app that records whether it was reached."""

    def __init__(self, limits: BodyLimits) -> None:
        self.reached = False
        self.sent: list[Message] = []

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            self.reached = True
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        self.limit = BodyLimit(app, TokenTable(admin=(ADMIN,)), limits, Throttle())

    async def post(self, path: str, headers: dict[str, str], receive: Receive) -> Message:
        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }

        async def send(message: Message) -> None:
            self.sent.append(message)

        await self.limit(scope, receive, send)
        return self.sent[0]


async def _never_read() -> Message:
    raise AssertionError("the body was read")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789", "Basic abc"])
def test_an_api_body_without_a_known_token_is_refused_unread(authorization: str | None) -> None:
    asgi = _Asgi(BodyLimits())
    headers = {"Content-Length": "16777000"}
    if authorization:
        headers["Authorization"] = authorization
    start = anyio.run(asgi.post, "/api/v1/jobs", headers, _never_read)
    assert start["status"] == 401 and not asgi.reached
    assert (b"connection", b"close") in start["headers"]


def test_an_api_body_with_a_known_token_reaches_the_app() -> None:
    asgi = _Asgi(BodyLimits())

    async def body() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    headers = {"Content-Length": "2", "Authorization": f"Bearer {ADMIN}"}
    assert anyio.run(asgi.post, "/api/v1/jobs", headers, body)["status"] == 204


def test_a_body_that_stalls_is_cut_off() -> None:
    asgi = _Asgi(BodyLimits(seconds=0.2))

    async def stalled() -> None:
        start = await asgi.post("/login", {"Content-Length": "1000"}, _one_chunk_then_silence())
        assert start["status"] == 408 and not asgi.reached
        assert (b"connection", b"close") in start["headers"]

    async def bounded() -> None:
        with anyio.fail_after(5):
            await stalled()

    anyio.run(bounded)


def _one_chunk_then_silence() -> Receive:
    calls = 0

    async def receive() -> Message:
        nonlocal calls
        calls += 1
        if calls == 1:
            return {"type": "http.request", "body": b"token=", "more_body": True}
        await anyio.Event().wait()  # the client sends nothing more
        raise AssertionError("unreachable")

    return receive
