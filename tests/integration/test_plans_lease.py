"""The statements that look for the earliest lease find it in one descent of the lease index,
however many jobs run, whatever the last ANALYZE saw. Statistics taken while no job was running
made the planner walk every running job's entry in the running-queue index instead (same
predicate, priced the same): every claim then read every running job. Counted in rows the plan
examined (EXPLAIN ANALYZE rolled back), which do not depend on the machine's speed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.integration.plans import analyzed_without, explain, nodes, scans_jobs

TABLE_JOBS = 3_000
RUNNING = 2_000  # running when the statement runs; none when analyzed
# A descent reads the first entry, and the claim's probes of an empty queue read none; a walk
# reads every running job.
AT_MOST = 10

STATEMENTS: dict[str, dict[str, Any]] = {
    # A queue with nothing pending: what the claim reads is its wake-up's.
    "job_claim": {
        "queues": ["empty"],
        "limit": 100,
        "worker_id": "w1",
        "now": datetime.now(UTC),
        "leases": Jsonb({}),
        "max_attempts": Jsonb({}),
        "default_max_attempts": 20,
    },
    "job_next_wakeup": {"queues": ["empty"]},
    # Every lease runs an hour longer: nothing to rescue.
    "job_rescue_expired": {"now": datetime.now(UTC), "limit": 100},
}


def _rows_examined(dsn: str, name: str, *, generic: bool) -> int:
    """Rows the statement's scans of chronoq_jobs examined (returned or filtered out), over all
    their loops."""
    with psycopg.connect(dsn) as conn:
        plan = explain(conn, name, STATEMENTS[name], generic=generic)
    return sum(
        (int(node["Actual Rows"]) + int(node.get("Rows Removed by Filter", 0)))
        * int(node["Actual Loops"])
        for node in nodes(plan)
        if scans_jobs(node)
    )


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_the_earliest_lease_is_one_descent_of_the_lease_index(
    pg_dsn: str, name: str, generic: bool
) -> None:
    analyzed_without(pg_dsn, "pending", "running", jobs=TABLE_JOBS, moved=RUNNING)
    examined = _rows_examined(pg_dsn, name, generic=generic)
    assert examined <= AT_MOST, (name, examined)
