"""Statements that name their jobs by id reach them by the primary key, whatever the last ANALYZE
saw. Statistics taken while no job was running (or pending) made the planner reach the rows by
the partial index on that status and walk every such row once per id: a batch of 600 finishes
beside 1,400 running jobs then took 386 ms. Counted in rows read from the plan of each
statement (EXPLAIN ANALYZE rolled back), which do not depend on the machine's speed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.integration.plans import analyzed_without, explain, rows_read, scans_jobs

TABLE_JOBS = 3_000
IN_STATUS = 2_000  # running (or pending) when the statement runs; none when analyzed
NAMED = 20


def _ids() -> list[int]:
    return list(range(1, NAMED + 1))


def _fenced_args() -> dict[str, Any]:
    return {"ids": _ids(), "tokens": [1] * NAMED}


RUNNING_STATEMENTS: dict[str, dict[str, Any]] = {
    "job_complete_many": _fenced_args(),
    "job_release_many": _fenced_args(),
    "job_hand_off_many": _fenced_args() | {"delay": 1.0},
    "job_complete_in": {"id": 1, "token": 1, "output": None},
    "job_finish_many": _fenced_args()
    | {
        "outcomes": ["done"] * NAMED,
        "delays": [0.0] * NAMED,
        "errors": [None] * NAMED,
        "keeps": [False] * NAMED,
        "outputs": [None] * NAMED,
    },
    "job_heartbeat_many": _fenced_args() | {"progress": [None] * NAMED, "notes": [None] * NAMED},
}

PENDING_STATEMENTS: dict[str, dict[str, Any]] = {
    "job_defer_many": {
        "ids": _ids(),
        "run_ats": [datetime.now(UTC) + timedelta(hours=1)] * NAMED,
    },
    "job_claim_ids": {
        "ids": _ids(),
        "worker_id": "w1",
        "now": datetime.now(UTC),
        "max_attempts": Jsonb({}),
        "leases": Jsonb({}),
        "default_max_attempts": 20,
    },
    "job_skip_ids": {"ids": _ids(), "now": datetime.now(UTC)},
}


def _rows_read(dsn: str, name: str, args: dict[str, Any], *, generic: bool) -> int:
    """Rows the statement's scans of chronoq_jobs returned, over all their loops."""
    with psycopg.connect(dsn) as conn:
        plan = explain(conn, name, args, generic=generic)
    return rows_read(plan, scans_jobs)


STATEMENTS = RUNNING_STATEMENTS | PENDING_STATEMENTS

# Each statement, the status its rows are in when it runs, and the status of all of them when
# the table was analyzed.
CASES = [(name, "running", "pending") for name in sorted(RUNNING_STATEMENTS)] + [
    (name, "pending", "done") for name in sorted(PENDING_STATEMENTS)
]


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize(("name", "status", "analyzed_status"), CASES)
def test_a_statement_reads_only_the_jobs_it_names(
    pg_dsn: str, name: str, status: str, analyzed_status: str, generic: bool
) -> None:
    analyzed_without(pg_dsn, analyzed_status, status, jobs=TABLE_JOBS, moved=IN_STATUS)
    args = STATEMENTS[name]
    read = _rows_read(pg_dsn, name, args, generic=generic)
    named = len(args["ids"]) if "ids" in args else 1
    assert read <= named, (name, read)
