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

-- name: chronoq_herd_due_at
-- The herd's one due instant: the first whole second at least `lead` seconds from now on the
-- database's clock (the clock that stamps `started_at`), so 1-second windows counted from it
-- are also whole seconds of the clock.
SELECT date_trunc('second', clock_timestamp() + make_interval(secs => %(lead)s))
       + interval '1 second' AS due

-- name: chronoq_herd_unfinished
-- Herd jobs pending (due or not yet) or running, up to a cap, walking the same two partial
-- indexes as `chronoq_unfinished`. Without the due condition, so polling may start before the
-- herd falls due.
SELECT count(*) AS n FROM (
    (SELECT 1 FROM chronoq_jobs WHERE status = 'running' ORDER BY locked_until LIMIT %(cap)s)
    UNION ALL
    (SELECT 1 FROM chronoq_jobs
     WHERE status = 'pending' AND queue = %(queue)s
     ORDER BY run_at LIMIT %(cap)s)
) AS unfinished

-- name: chronoq_herd_unfinished_sqlite
SELECT count(*) AS n FROM (
    SELECT 1 FROM chronoq_jobs
    WHERE queue = :queue AND status IN ('pending', 'running')
    LIMIT :cap
)

-- name: chronoq_herd_starts
-- Due and start instants of the herd's started jobs, as whole microseconds since the epoch
-- (`extract` returns an exact numeric, so nothing is lost to floating point).
SELECT (extract(epoch FROM run_at) * 1000000)::bigint AS due_us,
       (extract(epoch FROM started_at) * 1000000)::bigint AS started_us,
       worker_id
FROM chronoq_jobs
WHERE queue = %(queue)s AND started_at IS NOT NULL

-- name: chronoq_herd_starts_sqlite
-- SQLite stores instants as microseconds since the epoch already.
SELECT run_at AS due_us, started_at AS started_us, worker_id
FROM chronoq_jobs
WHERE queue = :queue AND started_at IS NOT NULL

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
