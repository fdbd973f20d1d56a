"""What a claim reads on PostgreSQL: a claim that comes back short must not walk the index
entries of the jobs not yet due. Counted in index pages from the claim's own plan (EXPLAIN
ANALYZE, rolled back), which do not depend on the machine's speed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chronoq.storage.postgres.session import Q
from chronoq.storage.postgres.store import PostgresStore
from tests.contract.support import insert, params

CLAIM_INDEX = "chronoq_jobs_claim_idx"
FUTURE_JOBS = 20_000


def _claim_index_pages(dsn: str) -> int:
    """Pages of the claim index the claim statement reads, for a claim of up to 200 jobs."""
    args = {
        "queues": ["q"],
        "limit": 200,
        "worker_id": "w1",
        "now": datetime.now(UTC),
        "leases": Jsonb({}),
        "max_attempts": Jsonb({}),
        "default_max_attempts": 20,
    }
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q["job_claim"], args
        ).fetchone()
        conn.rollback()
    assert row is not None
    return sum(_index_pages(row[0][0]["Plan"]))


def _index_pages(node: dict[str, Any]) -> list[int]:
    pages = []
    if node.get("Index Name") == CLAIM_INDEX:
        pages.append(int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"]))
    for child in node.get("Plans", []):
        pages += _index_pages(child)
    return pages


def test_a_short_claim_reads_no_index_pages_of_jobs_not_yet_due(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    try:
        insert(store, *[params(priority=p) for p in (0, 0, 3, 3, 3)])
        alone = _claim_index_pages(pg_dsn)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO chronoq_jobs (queue, task, payload, run_at, priority)"
                " SELECT 'q', 't', '{}', now() + g * interval '1 second', g %% 2 * 3"
                " FROM generate_series(1, %s) AS g",
                (FUTURE_JOBS,),
            )
            conn.execute("VACUUM ANALYZE chronoq_jobs")
        beside = _claim_index_pages(pg_dsn)
    finally:
        store.close()
    # Walking the future jobs' entries would read about a hundred pages more; each of the
    # claim's descents into a deeper index reads a page or two more, and no more.
    assert beside - alone <= 12, (alone, beside)
