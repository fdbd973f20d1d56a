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

-- name: raw_insert_sqlite
-- The bare SQLite loop's enqueue: the rows chronoq's bulk path writes, straight in.
INSERT INTO chronoq_jobs (queue, task, payload, priority, run_at, max_attempts, lease_seconds,
                          created_at)
VALUES (:queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :now)

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

-- name: poison_unfinished
-- The poison figure's jobs pending (due or not yet: a retry waits out its backoff) or running,
-- up to a cap, each half walking a partial index like `chronoq_unfinished`.
SELECT count(*) AS n FROM (
    (SELECT 1 FROM chronoq_jobs WHERE status = 'running' ORDER BY locked_until LIMIT %(cap)s)
    UNION ALL
    (SELECT 1 FROM chronoq_jobs
     WHERE status = 'pending' AND queue = %(work)s ORDER BY run_at LIMIT %(cap)s)
    UNION ALL
    (SELECT 1 FROM chronoq_jobs
     WHERE status = 'pending' AND queue = %(poison)s ORDER BY run_at LIMIT %(cap)s)
) AS unfinished

-- name: poison_work
-- The work queue's drain, read once it is over: its span from the first start to the last
-- finish in exact epoch seconds, and how its jobs ended. A retried job keeps the start of its
-- last attempt, which is never the drain's first start unless that attempt itself failed.
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE attempts > 1) AS retried,
       coalesce(sum(attempts - 1) FILTER (WHERE attempts > 1), 0) AS extra_attempts,
       coalesce(max(attempts), 0) AS max_attempts,
       extract(epoch FROM min(started_at)) AS first_start,
       extract(epoch FROM max(finished_at)) AS last_finish
FROM chronoq_jobs
WHERE queue = %(queue)s

-- name: poison_work_errors
-- What the work queue's failed attempts say, by kind.
SELECT e.value ->> 'error' AS kind, count(*) AS n
FROM chronoq_jobs AS j, jsonb_array_elements(j.errors) AS e
WHERE j.queue = %(queue)s
GROUP BY 1
ORDER BY 1

-- name: poison_jobs
SELECT id, task, status, attempts, max_attempts, errors
FROM chronoq_jobs
WHERE queue = %(queue)s
ORDER BY id

-- name: poison_crashed_workers
-- Worker processes whose death failed at least one attempt (of any queue), by the worker id
-- the crash records carry: a process that died running a job.
SELECT count(DISTINCT e.value ->> 'worker') AS n
FROM chronoq_jobs AS j, jsonb_array_elements(j.errors) AS e
WHERE e.value ->> 'error' = 'WorkerCrashed'

-- name: pgqueuer_unfinished
-- PGQueuer moves finished jobs to its log table: what is left in the queue table is unfinished.
SELECT count(*) AS n FROM (SELECT 1 FROM pgqueuer LIMIT $1) AS unfinished

-- name: procrastinate_unfinished
SELECT count(*) AS n FROM (
    SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing') LIMIT %(cap)s
) AS unfinished

-- name: raw_copy
-- The raw limit of bulk enqueue: COPY of exactly the rows chronoq's bulk path writes, in
-- binary as chronoq writes them (RAW_COPY_TYPES in bare_sql.py).
COPY chronoq_jobs (queue, task, payload, priority, run_at, max_attempts, lease_seconds)
FROM STDIN (FORMAT BINARY)

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

-- name: tier_done
-- Figure 8: jobs finished so far (its databases hold its jobs only).
SELECT count(*) FROM chronoq_jobs WHERE status = 'done'

-- name: tier_lateness
-- Figure 8: how late each finished job above an id started, in seconds, both instants on the
-- database clock.
SELECT extract(epoch FROM started_at - run_at)::float8
FROM chronoq_jobs WHERE status = 'done' AND id > %(after)s

-- name: tier_started_at
-- Figure 8: when one job started (epoch seconds), or NULL while it has not.
SELECT extract(epoch FROM started_at)::float8 FROM chronoq_jobs WHERE id = %(id)s

-- name: tier_db_now
-- Figure 8: the database clock, epoch seconds.
SELECT extract(epoch FROM clock_timestamp())::float8

-- name: tier_statements
-- Figure 8: statements executed in one database so far, as pg_stat_statements counts them.
SELECT coalesce(sum(s.calls), 0)::bigint
FROM pg_stat_statements AS s JOIN pg_database AS d ON d.oid = s.dbid
WHERE d.datname = %(db)s

-- name: tier_database_activity
-- Figure 8: transactions committed and rows fetched in one database so far.
SELECT xact_commit, tup_fetched FROM pg_stat_database WHERE datname = %(db)s

-- name: tier_create_statements
CREATE EXTENSION IF NOT EXISTS pg_stat_statements

-- name: raw_insert
-- The raw limit of enqueue one by one: a single-row INSERT of the row `App.enqueue` writes for a
-- job due now, returning its id as every enqueue call does.
INSERT INTO chronoq_jobs (queue, task, payload, priority, run_at, max_attempts, lease_seconds)
VALUES (
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s, clock_timestamp(), %(max_attempts)s,
    %(lease_seconds)s
)
RETURNING id

-- name: claim_head_no_autovacuum
-- bench.claim_head: the entries of claimed jobs stay until the benchmark's own VACUUM.
ALTER TABLE chronoq_jobs SET (autovacuum_enabled = false)

-- name: claim_head_finished
-- bench.claim_head: a retention window's history, finished a day ago (outside the claim index).
INSERT INTO chronoq_jobs (queue, task, status, run_at, attempts, max_attempts, started_at,
                          finished_at)
SELECT 'default', 'noop', 'done', now() - interval '1 day', 1, 3, now() - interval '1 day',
       now() - interval '1 day'
FROM generate_series(1, %(count)s)

-- name: claim_head_vacuum
VACUUM chronoq_jobs

-- name: fleet_statements
-- Figure 11: every statement pg_stat_statements has counted in one database so far.
-- plans and total_plan_time stay 0 unless pg_stat_statements.track_planning is on.
SELECT s.queryid, s.toplevel, s.calls, s.total_exec_time, s.rows, s.plans, s.total_plan_time,
       s.query
FROM pg_stat_statements AS s JOIN pg_database AS d ON d.oid = s.dbid
WHERE d.datname = %(db)s

-- name: fleet_processes
-- Figure 11: processes of one kind registered, running and refreshing their row.
SELECT count(*) FROM chronoq_processes
WHERE kind = %(kind)s AND stopped_at IS NULL AND expires_at > clock_timestamp()

-- name: fleet_finished
-- Figure 11: the stream's jobs (ids above `after`) finished so far.
SELECT count(*) FROM chronoq_jobs WHERE id > %(after)s AND status = 'done'

-- name: fleet_outcome
-- Figure 11: of the stream's jobs, how many finished, how many were started more than once,
-- how many there are.
SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE attempts > 1), count(*)
FROM chronoq_jobs WHERE id > %(after)s

-- name: fleet_lateness
-- Figure 11: started_at - run_at, seconds, of the stream's jobs due within the window.
SELECT extract(epoch FROM started_at - run_at)::float8 FROM chronoq_jobs
WHERE id > %(after)s AND status = 'done'
  AND run_at >= to_timestamp(%(start)s) AND run_at < to_timestamp(%(end)s)

-- name: fleet_analyze
ANALYZE chronoq_jobs

-- name: fleet_max_id
SELECT coalesce(max(id), 0) FROM chronoq_jobs

-- name: fleet_preload
SHOW shared_preload_libraries

-- name: claim_head_staged
-- The claim-head benchmark's claim by id: the pending jobs' ids and lease tokens in id order.
SELECT id, lease_token FROM chronoq_jobs WHERE status = 'pending' ORDER BY id

-- name: stage_pending_insert
-- bench.stage_pending: pending jobs falling due evenly over the next `hours`, ids in no order of
-- run_at (as deferred work is enqueued).
INSERT INTO chronoq_jobs (queue, task, run_at)
SELECT 'default', 'noop', now() + random() * %(hours)s * interval '1 hour'
FROM generate_series(1, %(count)s)

-- name: stage_pending_analyze
ANALYZE chronoq_jobs

-- name: stage_pending_backend
-- The backend of the store's one pooled connection (the only other client of the database),
-- and the highest job id.
SELECT (SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND backend_type = 'client backend' LIMIT 1) AS pid,
       (SELECT max(id) FROM chronoq_jobs) AS max_id
