"""The API fuzzed from its own OpenAPI document (schemathesis): whatever a client sends, valid
by the schema or not, the answer is never a 5xx, and every answer matches the document."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chronoq.http.auth import TokenTable
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics

from .conftest import ADMIN, make_app

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


# The schema is read from the server at import. The server's context then gets, for each store
# in turn, an App whose store is opened when the first example reaches it and kept for every
# example of the store: what one example stored is data for the next.
_FOLDER = Path(tempfile.mkdtemp(prefix="chronoq-fuzz-"))
_CONTEXT = HttpContext(
    make_app(f"sqlite:///{_FOLDER / 'jobs.db'}"), TokenTable(admin=(ADMIN,)), Metrics()
)
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", create_server(_CONTEXT))


@pytest.fixture(scope="module", params=["sqlite", "postgres"], autouse=True)
def _store_under_test(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.param == "postgres":
        dsn = str(request.getfixturevalue("pg_database"))
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "TRUNCATE chronoq_jobs, chronoq_schedules, chronoq_queues RESTART IDENTITY"
            )
        _CONTEXT.app = make_app(dsn)
    else:
        _CONTEXT.app = make_app(f"sqlite:///{_FOLDER / 'jobs.db'}")
    app = _CONTEXT.app
    app.sync()
    app.enqueue("send_email", {"to": "a@example.com"}, key="seed")
    yield
    app.close()
    if request.param == "sqlite":
        shutil.rmtree(_FOLDER, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_never_answers_5xx(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {ADMIN}"}, checks=CHECKS)
