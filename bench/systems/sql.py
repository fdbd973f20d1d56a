"""The harness's own statements, from `queries.sql` beside this file."""

from chronoq.storage.sqlfile import load_queries

Q = load_queries("bench.systems", "queries.sql")
