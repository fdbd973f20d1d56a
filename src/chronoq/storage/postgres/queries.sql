-- Queries of the PostgreSQL store. Each block is one statement, named by `-- name:`.
-- Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets tests
-- pin it and leaves production on the server's clock.

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

-- name: schema_check
SELECT to_regclass('chronoq_jobs') IS NOT NULL AS present

-- name: db_now
SELECT clock_timestamp() AS now

-- name: job_insert
INSERT INTO chronoq_jobs (queue, task, payload, priority, run_at, max_attempts, lease_seconds, key)
VALUES (
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s,
    coalesce(%(run_at)s, clock_timestamp() + %(delay)s * interval '1 second'),
    %(max_attempts)s, %(lease_seconds)s, %(key)s
)
ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
RETURNING id

-- name: job_reserve_ids
-- Ids handed out before a bulk insert, so each input row maps to its id without trusting the
-- order of RETURNING; the database clock is read in the same round trip. One array, ascending,
-- so that jobs enqueued together are claimed in the order given.
-- The sequence is looked up once (an uncorrelated subquery), not once per id: that look-up
-- costs several times the nextval itself.
WITH sequence AS MATERIALIZED (
    SELECT pg_get_serial_sequence('chronoq_jobs', 'id')::regclass AS name
)
SELECT (SELECT array_agg(reserved.id ORDER BY reserved.id)
        FROM (SELECT nextval(sequence.name) AS id
              FROM sequence, generate_series(1, %(count)s)) AS reserved) AS ids,
       clock_timestamp() AS now

-- name: job_insert_many
INSERT INTO chronoq_jobs
    (id, queue, task, payload, priority, run_at, max_attempts, lease_seconds, key)
SELECT * FROM unnest(
    %(ids)s::bigint[], %(queues)s::text[], %(tasks)s::text[], %(payloads)s::jsonb[],
    %(priorities)s::integer[], %(run_ats)s::timestamptz[], %(max_attempts)s::integer[],
    %(lease_seconds)s::float8[], %(keys)s::text[]
)
ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
RETURNING id

-- name: job_copy_many
COPY chronoq_jobs (id, queue, task, payload, priority, run_at, max_attempts, lease_seconds)
FROM STDIN

-- name: job_live_ids_by_key
SELECT key, id FROM chronoq_jobs
WHERE key = ANY(%(keys)s::text[]) AND status IN ('pending', 'running')

-- name: job_claim
-- The CTE picks due rows in claim order and locks them; SKIP LOCKED lets concurrent workers take
-- disjoint batches without waiting on each other. The UPDATE then starts the attempt: a new
-- fencing token, the owner, and a lease measured on the database clock. LIMIT is what the
-- worker can start now or hold for its next free slot. The clock is read once (a CTE with a
-- volatile function is evaluated once), so started_at and the lease share one instant.
--
-- The same round trip tells the worker when to look again, for when the claim comes back short:
-- the earliest pending run_at after this statement's clock (rows due now were claimed here or
-- are locked by another worker) and the earliest lease to expire. A worker taking jobs as they
-- fall due thus needs one statement per wake-up, not two. There is always one row: the wake-up
-- columns, joined to each claimed job, or alone with NULL job columns when nothing was claimed.
WITH clock AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
),
due AS (
    SELECT candidate.id
    -- DISTINCT: a queue named twice would be scanned twice and fill LIMIT with duplicates.
    FROM clock, (SELECT DISTINCT name FROM unnest(%(queues)s::text[]) AS u(name)) AS q,
    LATERAL (
        -- One index range scan per queue (chronoq_jobs_claim_idx), so a worker serving several
        -- queues never sorts a whole backlog; the outer ORDER BY merges at most limit x queues.
        SELECT id, priority, run_at
        FROM chronoq_jobs
        WHERE status = 'pending'
          AND queue = q.name
          AND run_at <= clock.now
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS candidate
    ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
    LIMIT %(limit)s
),
claimed AS (
UPDATE chronoq_jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    lease_token = j.lease_token + 1,
    worker_id = %(worker_id)s,
    started_at = clock.now,
    -- A job enqueued without a max_attempts of its own takes the claiming worker's task setting.
    max_attempts = coalesce(
        j.max_attempts, (%(max_attempts)s::jsonb ->> j.task)::integer, %(default_max_attempts)s),
    -- The worker's own lease for the task wins: it runs the code and sends the heartbeats.
    lease_seconds = coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds),
    locked_until = clock.now
        + coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds) * interval '1 second'
FROM due, clock
WHERE j.id = due.id
RETURNING j.*
),
wakeup AS (
    SELECT clock.now AS wakeup_db_now,
           (SELECT min(first_due.run_at)
            FROM (SELECT DISTINCT name FROM unnest(%(queues)s::text[]) AS u(name)) AS q,
            LATERAL (SELECT run_at FROM chronoq_jobs
                     WHERE status = 'pending' AND queue = q.name AND run_at > clock.now
                     ORDER BY run_at LIMIT 1) AS first_due) AS wakeup_next_run_at,
           (SELECT min(locked_until) FROM chronoq_jobs WHERE status = 'running')
               AS wakeup_next_lease_expiry
    FROM clock
)
SELECT claimed.*, wakeup.*
FROM wakeup LEFT JOIN claimed ON true

-- name: job_finish_many
-- Fenced: a row whose token moved on (the lease expired and someone else claimed it) or whose
-- status is no longer running is left alone, and its id is missing from the result. An error
-- joins the history stamped by the store with the attempt it belongs to, its start and its end;
-- the clock is read once so that end equals finished_at.
WITH clock AS MATERIALIZED (
    SELECT clock_timestamp() AS now
),
outcome AS (
    SELECT *
    FROM unnest(
        %(ids)s::bigint[], %(tokens)s::bigint[], %(outcomes)s::text[],
        %(delays)s::float8[], %(errors)s::jsonb[]
    ) AS o(id, token, outcome, delay, error)
)
UPDATE chronoq_jobs AS j
SET status = CASE WHEN o.outcome = 'retry' THEN 'pending' ELSE o.outcome END,
    run_at = CASE WHEN o.outcome = 'retry'
                  THEN clock.now + o.delay * interval '1 second'
                  ELSE j.run_at END,
    locked_until = NULL,
    finished_at = CASE WHEN o.outcome = 'retry' THEN NULL ELSE clock.now END,
    errors = CASE WHEN o.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(o.error || jsonb_build_object(
                      'attempt', j.attempts, 'started_at', j.started_at,
                      'finished_at', clock.now))
             END
FROM outcome AS o, clock
WHERE j.id = o.id AND j.lease_token = o.token AND j.status = 'running'
RETURNING j.id

-- name: job_complete_in
UPDATE chronoq_jobs
SET status = 'done', locked_until = NULL, finished_at = clock_timestamp()
WHERE id = %(id)s AND lease_token = %(token)s AND status = 'running'
RETURNING id

-- name: job_heartbeat_many
UPDATE chronoq_jobs AS j
SET locked_until = clock_timestamp() + j.lease_seconds * interval '1 second'
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.status = 'running'
RETURNING j.id

-- name: job_release_many
-- The job never started here, so the attempt the claim counted is given back.
UPDATE chronoq_jobs AS j
SET status = 'pending', attempts = j.attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.status = 'running'
RETURNING j.id

-- name: job_rescue_expired
-- A running job whose lease ended belongs to a worker that died or stalled. It runs again at
-- once, or goes dead if that was its last attempt; the expiry joins its error history. SKIP
-- LOCKED keeps rescuers on several workers from blocking each other.
WITH clock AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
),
expired AS (
    SELECT id
    FROM chronoq_jobs, clock
    WHERE status = 'running' AND locked_until < clock.now
    ORDER BY locked_until
    LIMIT %(limit)s
    FOR UPDATE OF chronoq_jobs SKIP LOCKED
)
UPDATE chronoq_jobs AS j
SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    run_at = clock.now,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN clock.now END,
    locked_until = NULL,
    worker_id = NULL,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempts,
        'error', 'LeaseExpired',
        'message', 'the lease expired before worker ' || coalesce(j.worker_id, '?')
                   || ' reported back (crashed, stalled or cut off)',
        'traceback', '',
        'worker', j.worker_id,
        'started_at', j.started_at,
        'finished_at', clock.now,
        'outcome', CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'retry' END))
FROM expired, clock
WHERE j.id = expired.id
RETURNING j.id, j.status

-- name: job_next_wakeup
SELECT clock_timestamp() AS db_now,
       (SELECT min(next_run_at) FROM unnest(%(queues)s::text[]) AS q(name),
            LATERAL (SELECT run_at AS next_run_at FROM chronoq_jobs
                     WHERE status = 'pending' AND queue = q.name
                     ORDER BY run_at LIMIT 1) AS first_due) AS next_run_at,
       (SELECT min(locked_until) FROM chronoq_jobs WHERE status = 'running') AS next_lease_expiry

-- name: job_get
SELECT * FROM chronoq_jobs WHERE id = %(id)s

-- name: job_list
SELECT * FROM chronoq_jobs
WHERE (cardinality(%(statuses)s::text[]) = 0 OR status = ANY(%(statuses)s::text[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: job_cancel
UPDATE chronoq_jobs
SET status = 'cancelled', locked_until = NULL, finished_at = clock_timestamp()
WHERE id = %(id)s AND status IN ('pending', 'running')
RETURNING *

-- name: dead_requeue
-- A requeued job starts over with all its attempts and keeps its error history. A dead job whose
-- key is now held by a live job stays dead (reported as a key conflict), and of several dead jobs
-- sharing a key only the newest is requeued. The candidates are locked first and chosen after:
-- PostgreSQL allows no FOR UPDATE next to DISTINCT. Keyless jobs group by id alone, so a key
-- that happens to spell another job's id never hides that job.
WITH dead AS (
    SELECT d.id, d.key
    FROM chronoq_jobs AS d
    WHERE d.status = 'dead'
      AND (%(all)s OR d.id = ANY(%(ids)s::bigint[]))
      AND (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
    FOR UPDATE
),
chosen AS (
    SELECT DISTINCT ON (dead.key, CASE WHEN dead.key IS NULL THEN dead.id END) dead.id
    FROM dead
    WHERE NOT EXISTS (
        SELECT 1 FROM chronoq_jobs AS l
        WHERE dead.key IS NOT NULL AND l.key = dead.key AND l.status IN ('pending', 'running'))
    ORDER BY dead.key, CASE WHEN dead.key IS NULL THEN dead.id END, dead.id DESC
)
UPDATE chronoq_jobs AS j
SET status = 'pending', attempts = 0, run_at = clock_timestamp(), locked_until = NULL,
    worker_id = NULL, started_at = NULL, finished_at = NULL
FROM chosen
WHERE j.id = chosen.id AND j.status = 'dead'
RETURNING j.id

-- name: dead_ids
SELECT id FROM chronoq_jobs
WHERE status = 'dead'
  AND (%(all)s OR id = ANY(%(ids)s::bigint[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)

-- name: dead_purge
DELETE FROM chronoq_jobs
WHERE status = 'dead'
  AND finished_at <= clock_timestamp() - %(older_than)s * interval '1 second'
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)

-- name: stats
SELECT queue, status, count(*) AS count
FROM chronoq_jobs
GROUP BY queue, status
-- Byte order, as on SQLite, whatever the cluster's collation.
ORDER BY queue COLLATE "C", status

-- name: listen
LISTEN chronoq_jobs
