-- Statements the benchmark harness runs itself, named by `-- name:` like chronoq's own files.

-- name: chronoq_remaining
SELECT count(*) AS n FROM chronoq_jobs WHERE status IN ('pending', 'running')

-- name: raw_copy
-- The raw limit of bulk enqueue: COPY of exactly the rows chronoq's bulk path writes.
COPY chronoq_jobs (queue, task, payload, priority, run_at, max_attempts, lease_seconds)
FROM STDIN

-- name: future_backlog
-- Jobs that are not due for a day, written by the database itself: the backlog figure's ballast.
INSERT INTO chronoq_jobs (queue, task, payload, run_at, lease_seconds)
SELECT 'default', 'noop', '{}'::jsonb, clock_timestamp() + interval '1 day', 60
FROM generate_series(1, %(count)s)

-- name: drop_database
DROP DATABASE IF EXISTS {db} WITH (FORCE)

-- name: create_database
CREATE DATABASE {db}

-- name: vacuum_analyze
VACUUM ANALYZE

-- name: commits
SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()

-- name: flush_stats
SELECT pg_stat_clear_snapshot()
