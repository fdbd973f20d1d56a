-- Statements the benchmark harness runs itself, named by `-- name:` like chronoq's own files.

-- name: chronoq_unfinished
-- Jobs due or running, counted up to a cap: the harness polls this every few milliseconds, so
-- it must cost microseconds (a count of every row would load the server it measures).
-- Both halves walk a partial index in order (the lease index, the next-due index of the bench's
-- one queue), so a table full of finished rows is never scanned.
SELECT count(*) AS n FROM (
    (SELECT 1 FROM chronoq_jobs WHERE status = 'running' ORDER BY locked_until LIMIT %(cap)s)
    UNION ALL
    (SELECT 1 FROM chronoq_jobs
     WHERE status = 'pending' AND queue = 'default' AND run_at <= clock_timestamp()
     ORDER BY run_at LIMIT %(cap)s)
) AS unfinished

-- name: chronoq_unfinished_sqlite
SELECT count(*) AS n FROM (
    SELECT 1 FROM chronoq_jobs
    WHERE status = 'running' OR (status = 'pending' AND run_at <= :now)
    LIMIT :cap
)

-- name: pgqueuer_unfinished
-- PGQueuer moves finished jobs to its log table: what is left in the queue table is unfinished.
SELECT count(*) AS n FROM (SELECT 1 FROM pgqueuer LIMIT $1) AS unfinished

-- name: procrastinate_unfinished
SELECT count(*) AS n FROM (
    SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing') LIMIT %(cap)s
) AS unfinished

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

-- name: checkpoint
CHECKPOINT

-- name: commits
SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()

-- name: flush_stats
SELECT pg_stat_clear_snapshot()
