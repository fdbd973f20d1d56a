"""The schema cost benchmark at a tiny size against the real server: every variant's DDL applies
to the shipped schema, the drain empties the table (measure raises otherwise), and the report
has a row per variant. Its figures mean nothing at this size."""

from __future__ import annotations

import uuid

import psycopg
from bench.schema_cost import VARIANTS, measure, report

from tests.conftest import _admin_dsn, _missing_service


def test_every_variant_applies_and_drains() -> None:
    admin = _admin_dsn()
    try:
        psycopg.connect(admin, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        _missing_service(f"PostgreSQL not reachable at CHRONOQ_TEST_PG_DSN: {exc}")
    # The database is of this run alone: other runs may use the same server at the same time.
    database = f"chronoq_schema_cost_{uuid.uuid4().hex[:10]}"
    runs = measure(VARIANTS, jobs=200, batch=50, repeats=1, admin=admin, database=database)

    assert set(runs) == {variant.name for variant in VARIANTS}
    assert all(run.jobs_per_s > 0 and run.server_us >= 0 for [run] in runs.values())
    text, results = report(
        VARIANTS,
        runs,
        {"jobs": 200, "batch": 50, "repeats": 1}
        | {"machine": "test", "date": "today", "commit": "HEAD"},
    )
    assert len(results["rows"]) == len(VARIANTS)
    assert all(f"| {variant.name} |" in text for variant in VARIANTS)
