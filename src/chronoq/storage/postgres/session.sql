-- PostgreSQL: session set-up, migrations bookkeeping, the clock and LISTEN.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.

-- name: session_setup
-- Times inside JSON (error history) are written as ISO 8601 in UTC whatever the server default.
SET TIME ZONE 'UTC'

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
