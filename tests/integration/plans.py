"""EXPLAIN ANALYZE of one of chronoq's statements, rolled back: in a plan for the arguments given,
or in the generic plan that a prepared statement comes to keep after its custom tries."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from chronoq.storage.postgres.session import Q


def explain(
    conn: psycopg.Connection[Any], name: str, args: dict[str, Any], *, generic: bool
) -> dict[str, Any]:
    """The top plan node of statement `name` run with `args`; the transaction is rolled back."""
    try:
        if not generic:
            query = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q[name]
            row = conn.execute(query, args).fetchone()
        else:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(Q[name], args, prepare=True)
            prepared = conn.execute(
                "SELECT name FROM pg_prepared_statements WHERE NOT from_sql"
                " ORDER BY prepare_time DESC LIMIT 1"
            ).fetchone()
            assert prepared is not None
            # The prepared statement's parameters are numbered by each name's first appearance.
            order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", Q[name])))
            values = sql.SQL(", ").join(sql.Literal(args[key]) for key in order)
            execute = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {}({})").format(
                sql.Identifier(prepared[0]), values
            )
            row = conn.execute(execute).fetchone()
    finally:
        conn.rollback()
    assert row is not None
    return dict(row[0][0]["Plan"])


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The node and every node under it."""
    found = [node]
    for child in node.get("Plans", []):
        found += nodes(child)
    return found


def scans_jobs(node: dict[str, Any]) -> bool:
    """Is the node a scan of chronoq_jobs (sequential, index, index-only, bitmap heap)?"""
    return node.get("Relation Name") == "chronoq_jobs" and "Scan" in str(node["Node Type"])


def rows_read(plan: dict[str, Any], counted: Callable[[dict[str, Any]], bool]) -> int:
    """Rows that the counted nodes of the plan returned, over all their loops."""
    return sum(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for node in nodes(plan)
        if counted(node)
    )


def analyzed_without(dsn: str, analyzed_status: str, status: str, *, jobs: int, moved: int) -> None:
    """`jobs` jobs in `analyzed_status` when analyzed, then the first `moved` of them moved to
    `status` (with token 1, a running job's lease an hour long) behind the statistics' back."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chronoq_jobs (queue, task, payload, run_at, status, finished_at)"
            " SELECT 'q', 't', '{}', now() - interval '1 minute', %(status)s,"
            " CASE WHEN %(status)s = 'done' THEN now() END"
            " FROM generate_series(1, %(jobs)s)",
            {"status": analyzed_status, "jobs": jobs},
        )
        conn.execute("VACUUM ANALYZE chronoq_jobs")
        conn.execute(
            "UPDATE chronoq_jobs SET status = %(status)s, lease_token = 1, finished_at = NULL,"
            " locked_until = CASE WHEN %(status)s = 'running' THEN now() + interval '1 hour' END,"
            " attempts = CASE WHEN %(status)s = 'running' THEN 1 ELSE 0 END,"
            " started_at = CASE WHEN %(status)s = 'running' THEN now() END"
            " WHERE id <= %(moved)s",
            {"status": status, "moved": moved},
        )
