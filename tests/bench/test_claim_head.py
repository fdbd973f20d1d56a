"""The claim-head benchmark at a tiny size against the real server: the marks are reached with
chronoq's own statements, the VACUUM runs, and the report has a row per mark and one after the
VACUUM. Its figures mean nothing at this size."""

from __future__ import annotations

import uuid

import psycopg
from bench.claim_head import Sample, measure, report

from tests.conftest import _admin_dsn, _missing_service


def reachable_admin_dsn() -> str:
    """The test server's admin DSN; the test skips (fails under CI) when it is unreachable."""
    admin = _admin_dsn()
    try:
        psycopg.connect(admin, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        _missing_service(f"PostgreSQL not reachable at CHRONOQ_TEST_PG_DSN: {exc}")
    return admin


def tiny_run(claim: str) -> tuple[list[Sample], float]:
    """Marks 0 and 100 of a table of 100 finished jobs, 10 jobs a claim, 3 claims a sample."""
    return measure(
        finished=100,
        marks=(0, 100),
        batch=10,
        claims=3,
        admin=reachable_admin_dsn(),
        # Of this run alone: other runs may use the same server at the same time.
        database=f"chronoq_claim_head_{uuid.uuid4().hex[:10]}",
        claim=claim,
    )


SETTINGS = {"finished": 100, "batch": 10, "claims": 3, "machine": "test", "date": "today"}


def test_every_mark_is_sampled_and_the_vacuum_reported() -> None:
    samples, vacuum_s = tiny_run("db")

    assert [s.claimed_since_vacuum for s in samples] == [0, 100, 0]
    assert samples[-1].label == "after VACUUM" and vacuum_s >= 0
    assert all(s.claim_ms > 0 and s.server_ms >= 0 for s in samples)
    text, results = report(samples, vacuum_s, SETTINGS | {"commit": "HEAD"})
    assert len(results["samples"]) == 3
    assert "| 100 |" in text and "after a VACUUM" in text


def test_the_claim_by_id_is_sampled_beside_the_db_claim() -> None:
    runs = [tiny_run(claim) for claim in ("db", "ids")]
    by_id, _ = runs[1]
    # The claim by id starts jobs as the db claim does: the same marks are reached.
    assert [s.claimed_since_vacuum for s in by_id] == [0, 100, 0]
    assert all(s.claim_ms > 0 for s in by_id)
    text, results = report(*runs[0], SETTINGS | {"commit": "HEAD"}, runs[1])
    assert len(results["by_id"]["samples"]) == 3
    assert "claim by id, ms" in text and text.count("| 100 |") == 1
