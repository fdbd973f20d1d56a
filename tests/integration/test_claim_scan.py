"""What a claim costs PostgreSQL beside the work it does: a claim that comes back short must not
walk the index entries of the jobs not yet due (counted in index pages from the claim's own
plan, EXPLAIN ANALYZE rolled back, which do not depend on the machine's speed), and a prepared
claim must not be planned again at every execution."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chronoq.storage.postgres.session import Q, configure_session
from chronoq.storage.postgres.store import PostgresStore
from tests.contract.support import insert, params
from tests.integration.plans import explain, nodes, rows_read

JOBS_INDEXES = "chronoq_jobs_"
FUTURE_JOBS = 20_000


def _claim_args() -> dict[str, Any]:
    """A claim of up to 200 jobs."""
    return {
        "queues": ["q"],
        "limit": 200,
        "worker_id": "w1",
        "now": datetime.now(UTC),
        "leases": Jsonb({}),
        "max_attempts": Jsonb({}),
        "default_max_attempts": 20,
    }


def _claim_index_pages(dsn: str) -> int:
    """Pages of chronoq_jobs' indexes that a claim of up to 200 jobs reads."""
    with psycopg.connect(dsn) as conn:
        plan = explain(conn, "job_claim", _claim_args(), generic=False)
    return sum(
        int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"])
        for node in nodes(plan)
        if str(node.get("Index Name", "")).startswith(JOBS_INDEXES)
    )


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
    # Walking the future jobs' entries read 154 pages more (20 against 174); each descent of
    # the claim into a deeper index reads a page or two more (24 against 38), and no more.
    assert beside - alone <= 30, (alone, beside)


def test_the_claim_is_planned_once_not_at_every_execution(pg_dsn: str) -> None:
    """No parameter of the claim reaches the planner (the limit and the queues are read through
    subqueries), so a prepared claim's custom plans cost no less than its generic plan and
    PostgreSQL keeps the generic one after its five custom tries. A custom plan per claim was
    planning work at every execution, and planning probes the index for the range of run_at
    over every entry of the jobs claimed since the last vacuum."""
    args = _claim_args() | {"limit": 1}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # Enough due jobs, analyzed, that a custom plan for a claim of one is estimated cheaper
        # than a plan for any limit, as a real backlog is.
        conn.execute(
            "INSERT INTO chronoq_jobs (queue, task, payload, run_at)"
            " SELECT 'q', 't', '{}', now() - interval '1 hour' FROM generate_series(1, %s)",
            (FUTURE_JOBS,),
        )
        conn.execute("VACUUM ANALYZE chronoq_jobs")
        for _ in range(8):
            conn.execute(Q["job_claim"], args, prepare=True).fetchall()
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE 'WITH RECURSIVE clock%%'"
        ).fetchall()
    assert plans == [(3, 5)]


def test_a_claim_reads_due_jobs_that_share_a_run_at_in_index_order(pg_dsn: str) -> None:
    """Jobs enqueued in one call share their run_at, so the run_at index stores them once
    (deduplicated) while the claim index, which holds their ids, stays as large as the backlogs
    it held before. The planner then found reading the small run_at index and sorting each
    run_at's jobs by id cheaper, and every claim read all the due jobs (54 ms for 200 of 50,000).
    In a session set up as chronoq's are, it reads the claim index in order and stops after its
    limit."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # An earlier backlog of 50,000, drained: its entries leave the claim index's pages empty.
        conn.execute(
            "INSERT INTO chronoq_jobs (queue, task, payload, run_at)"
            " SELECT 'q', 't', '{}', now() - interval '1 day' FROM generate_series(1, 50000)"
        )
        conn.execute("UPDATE chronoq_jobs SET status = 'done', finished_at = now()")
        conn.execute("VACUUM chronoq_jobs")
        # 5,000 due now, enqueued in one call, and 1,000 due later at distinct times.
        conn.execute(
            "INSERT INTO chronoq_jobs (queue, task, payload, run_at)"
            " SELECT 'q', 't', '{}', now() - interval '1 minute' FROM generate_series(1, 5000)"
        )
        conn.execute(
            "INSERT INTO chronoq_jobs (queue, task, payload, run_at)"
            " SELECT 'q', 't', '{}', now() + g * interval '1 second'"
            " FROM generate_series(1, 1000) AS g"
        )
        conn.execute("VACUUM ANALYZE chronoq_jobs")
        configure_session(conn)
        conn.autocommit = False
        plan = explain(conn, "job_claim", _claim_args(), generic=True)
    read = rows_read(
        plan,
        lambda node: str(node.get("Index Name", "")).startswith(
            ("chronoq_jobs_claim", "chronoq_jobs_next")
        ),
    )
    # 200 claimed, and a row for each descent that finds the priorities and the wake-up.
    assert read <= 210, read
