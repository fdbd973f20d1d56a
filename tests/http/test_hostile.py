"""Hostile names and values through the API: each is refused with a 4xx naming the field, or
stored and read back exactly; whatever was stored before stays as it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.auth import TokenTable
from chronoq.storage.base import JobListParams

from .conftest import make_client

NAMES = [
    "<script>alert(1)</script>",
    "'; DROP TABLE chronoq_jobs; --",
    'quote " and \\ backslash',
    "emoji 🚀 and RTL \u202eevil",
    "x" * 200,
]


@pytest.fixture
def open_app(dsn: str) -> Iterator[chronoq.App]:
    """An app without tasks, like `chronoq serve` without --app: any task and queue name."""
    app = chronoq.App(dsn)
    yield app
    app.close()


@pytest.fixture
def open_client(open_app: chronoq.App) -> Iterator[TestClient]:
    with make_client(open_app, TokenTable()) as client:
        yield client


def _snapshot(app: chronoq.App) -> list[dict[str, Any]]:
    return [job.to_json() for job in app.store.job_list(JobListParams(limit=1000))]


@pytest.mark.parametrize("name", NAMES)
def test_hostile_names_round_trip(open_client: TestClient, name: str) -> None:
    body = {"task": name, "queue": name, "key": name, "rate_key": name, "payload": {name: name}}
    created = open_client.post("/api/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job = open_client.get(f"/api/v1/jobs/{created.json()['id']}").json()
    assert (job["task"], job["queue"], job["key"], job["rate_key"]) == (name, name, name, name)
    assert job["payload"] == {name: name}
    found = open_client.get("/api/v1/jobs", params={"queue": name, "task": name, "key": name})
    assert [j["id"] for j in found.json()["jobs"]] == [job["id"]]
    queues = [q["name"] for q in open_client.get("/api/v1/queues").json()]
    assert name in queues


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task": "t", "queue": "a\x00b"}, "queue"),
        ({"task": "t\x01"}, "task"),
        ({"task": "x" * 201}, "task"),
        ({"task": " "}, "task"),
        ({"task": "t", "key": ""}, "key"),
        ({"task": "t", "key": "k" * 1001}, "key"),
        ({"task": "t", "payload": {"a": "\x00"}}, "payload"),
        ({"task": "t", "delay": -1}, "delay"),
        ({"task": "t", "delay": "1e400s"}, "delay"),
        ({"task": "t", "run_at": "10000-01-01T00:00:00Z"}, "run_at"),
        ({"task": "t", "run_at": "9999-12-31T23:59:59-23:00"}, "run_at"),
        ({"task": "t", "max_attempts": 0}, "max_attempts"),
        ({"task": "t", "misfire": "sometimes"}, "misfire"),
    ],
)
def test_hostile_values_are_refused_and_harm_nothing(
    open_client: TestClient, open_app: chronoq.App, body: dict[str, Any], field: str
) -> None:
    open_app.enqueue("seed", {"kept": True}, key="seed")
    before = _snapshot(open_app)
    response = open_client.post("/api/v1/jobs", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]["field"] == field, response.text
    assert _snapshot(open_app) == before
    assert open_client.post("/api/v1/jobs", json={"task": "after"}).status_code == 201


def test_deeply_nested_payloads_are_refused(open_client: TestClient) -> None:
    deep: Any = {}
    for _ in range(300):
        deep = {"a": deep}
    response = open_client.post("/api/v1/jobs", json={"task": "t", "payload": deep})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "payload"


def test_lone_surrogates_are_refused(open_client: TestClient) -> None:
    raw = b'{"task": "t", "payload": {"a": "\\ud800"}}'
    response = open_client.post(
        "/api/v1/jobs", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "payload"
