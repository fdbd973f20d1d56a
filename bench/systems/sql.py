"""The harness's own statements, from `queries.sql` beside this file, and the raw COPY."""

from datetime import UTC, datetime
from typing import Any

import psycopg

from chronoq.storage.postgres.inserts import JSONB_VERSION
from chronoq.storage.sqlfile import load_queries

Q = load_queries("bench.systems", "queries.sql")
# raw_copy's wire types; its jsonb payload goes as chronoq's store sends one (JSONB_VERSION).
RAW_COPY_TYPES = ("text", "text", "text", "int4", "timestamptz", "int4", "float8")


def copy_noop_jobs(conn: "psycopg.Connection[Any]", count: int) -> None:
    """`count` pending no-op jobs, due now, by a raw binary COPY of the rows chronoq writes."""
    row = ("default", "noop", JSONB_VERSION + "{}", 0, datetime.now(UTC), 3, 60.0)
    with conn.cursor() as cur, cur.copy(Q["raw_copy"]) as copy:
        copy.set_types(RAW_COPY_TYPES)
        for _ in range(count):
            copy.write_row(row)
