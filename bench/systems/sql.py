"""The harness's own statements, from `queries.sql` beside this file, and the raw COPY."""

from datetime import UTC, datetime
from typing import Any

import psycopg

from chronoq.storage.sqlfile import load_queries

Q = load_queries("bench.systems", "queries.sql")
# raw_copy's wire types: jsonb in binary is a version byte, then the JSON text.
RAW_COPY_TYPES = ("text", "text", "text", "int4", "timestamptz", "int4", "float8")
RAW_NOOP_ROW = ("default", "noop", "\x01{}", 0, 3, 60.0)


def copy_noop_jobs(conn: "psycopg.Connection[Any]", count: int) -> None:
    """`count` pending no-op jobs, due now, by a raw binary COPY of the rows chronoq writes."""
    queue, task, payload, priority, max_attempts, lease = RAW_NOOP_ROW
    now = datetime.now(UTC)
    with conn.cursor() as cur, cur.copy(Q["raw_copy"]) as copy:
        copy.set_types(RAW_COPY_TYPES)
        for _ in range(count):
            copy.write_row((queue, task, payload, priority, now, max_attempts, lease))
