-- PostgreSQL: session set-up, migrations bookkeeping, the clock and LISTEN.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.

-- name: session_setup
-- Times inside JSON (error history) are written as ISO 8601 in UTC whatever the server default.
-- JIT compilation is off: chronoq's statements are short, but the planner's estimates on a
-- queue table (skewed by backlogs, churning) pass jit_above_cost easily, and compiling then
-- took 170-190 ms for a staging query that ran in 11 ms without it; the overview, the longest
-- statement here, ran no faster with it on a million rows.
-- Incremental sort is off: a claim reads one priority's due jobs in (run_at, id) order, which
-- chronoq_jobs_claim_idx gives as it is. Whenever ANALYZE found run_at almost unique (a
-- million jobs due at distinct times), the planner estimated that reading the run_at index
-- (chronoq_jobs_next_due_idx) and sorting each run_at's jobs by id was cheaper; but jobs
-- enqueued in one call share their run_at, so each claim then read and sorted all of them:
-- 54 ms a claim of 200 among 50,000 due jobs, against 6 ms.
SELECT set_config('TimeZone', 'UTC', false), set_config('jit', 'off', false),
       set_config('enable_incremental_sort', 'off', false)

-- name: migrations_table
CREATE TABLE IF NOT EXISTS chronoq_migrations (
    name       text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)

-- name: migrations_lock
-- Serialises concurrent `chronoq migrate` runs for the rest of the transaction.
SELECT pg_advisory_xact_lock(hashtext('chronoq_migrations'))

-- name: migrations_applied
SELECT name FROM chronoq_migrations ORDER BY name

-- name: migrations_record
INSERT INTO chronoq_migrations (name) VALUES (%(name)s)

-- name: migrations_forget
-- A migration undone by its down file: applying it again is pending work.
DELETE FROM chronoq_migrations WHERE name = %(name)s

-- name: db_now
SELECT clock_timestamp() AS now

-- name: listen
LISTEN chronoq_jobs

-- name: listen_finished
-- Statements that left jobs in a final state (see chronoq_notify_finished_v1): App.wait.
LISTEN chronoq_jobs_finished

-- name: sessions_end
-- Ends the sessions named `name` (a dead worker's: see chronoq.storage.dsn.session_name) on
-- this database; one row for each that was still there. PostgreSQL runs a statement whose
-- client has gone to its end and commits it: a claim sent just before its worker died would
-- take jobs for a worker that can no longer run them or give them back. Ended, the statement is
-- rolled back. An ended session is listed until its backend has exited; ending it again is
-- harmless. The sessions are chosen first (MATERIALIZED), so no other session is ever ended
-- whatever order the planner gives the conditions.
WITH named AS MATERIALIZED (
    SELECT a.pid
    FROM pg_stat_activity AS a
    WHERE a.application_name = %(name)s
      AND a.datname = current_database()
      AND a.pid <> pg_backend_pid()
)
SELECT named.pid, pg_terminate_backend(named.pid) AS ended
FROM named
