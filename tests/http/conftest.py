"""An API server on each store, with an admin and a read token, through Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.http.auth import TokenTable
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics

ADMIN = "admin-token-0123456789abcdef"
READER = "read-token-0123456789abcdef"


def make_app(dsn: str) -> chronoq.App:
    app = chronoq.App(dsn, payload_limit=10_000)

    @app.task(queue="emails", max_attempts=3)
    def send_email(to: str, subject: str = "") -> None: ...

    @app.task
    def cleanup() -> None: ...

    app.schedule("0 9 * * *", "cleanup", name="nightly", zone="Europe/Paris")
    return app


def make_client(app: chronoq.App, tokens: TokenTable) -> TestClient:
    metrics = Metrics()
    app.metrics = metrics
    metrics.watch_store(lambda: app.store)
    return TestClient(create_server(HttpContext(app, tokens, metrics)))


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    made = make_app(dsn)
    made.sync()
    yield made
    made.close()


@pytest.fixture
def client(app: chronoq.App) -> Iterator[TestClient]:
    with make_client(app, TokenTable(admin=(ADMIN,), read=(READER,))) as test_client:
        test_client.headers["Authorization"] = f"Bearer {ADMIN}"
        yield test_client
