"""The API fuzzed from its own OpenAPI document (schemathesis): whatever a client sends, valid
by the schema or not, the answer is never a 5xx, and every answer matches the document."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


# The schema is read from the server at import; the App opens its store (a SQLite file in a
# folder of this module's own) only when the first example reaches it, and keeps it for every
# example: what one example stored is data for the next.
_FOLDER = Path(tempfile.mkdtemp(prefix="chronoq-fuzz-"))
_APP = make_app(f"sqlite:///{_FOLDER / 'jobs.db'}")
_SERVER = create_server(HttpContext(_APP, TokenTable(admin=(ADMIN,)), Metrics()))
schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", _SERVER)


@pytest.fixture(scope="module", autouse=True)
def _seeded_store() -> Iterator[None]:
    _APP.sync()
    _APP.enqueue("send_email", {"to": "a@example.com"}, key="seed")
    yield
    _APP.close()
    shutil.rmtree(_FOLDER, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_never_answers_5xx(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {ADMIN}"}, checks=CHECKS)
