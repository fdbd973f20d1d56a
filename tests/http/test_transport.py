"""What the server does before a route sees a request: JSON past what the decoder takes, bodies
refused before they are read, and redirects that never name a host the client chose."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.redirects import relative_to
from chronoq.storage.base import JobListParams

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
