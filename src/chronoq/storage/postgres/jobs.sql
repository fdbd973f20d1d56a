-- PostgreSQL: chronoq_jobs — enqueue, claim, finish, leases, inspection, dead letters.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.
--
-- A statement that joins an array of ids to the jobs and checks their status reads the status
-- through a subquery, `status = (SELECT 'running')`. With a constant there, the planner may reach
-- the rows by a partial index on that status (chronoq_jobs_running_queue_idx,
-- chronoq_jobs_claim_idx) when the last ANALYZE saw few such rows, and then walks every running
-- (or pending) row for each id: a batch of 600 finishes beside 1,400 running jobs took 386 ms.
-- The subquery's value is unknown to the planner, so the rows are reached by the primary key.
-- (A single id, or `id = ANY(...)`, is planned on the primary key either way.)
--
-- The earliest lease (the claim's wake-up, job_next_wakeup, the rescuer) is found in one descent
-- of chronoq_jobs_lease_idx, however many jobs run: it is the only index whose predicate those
-- statements imply (migration 0010), and they ask for the first entry in its order (ORDER BY,
-- LIMIT 1). Written as min(), the planner reads every entry and aggregates when the last
-- ANALYZE saw few running jobs, pricing that the same as the descent.

-- name: job_insert
INSERT INTO chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, misfire,
    misfire_grace, rate_key, trace_context)
VALUES (
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s,
    coalesce(%(run_at)s, clock_timestamp() + %(delay)s * interval '1 second'),
    %(max_attempts)s, %(lease_seconds)s, %(key)s, %(misfire)s, %(misfire_grace)s, %(rate_key)s,
    %(trace_context)s::jsonb
)
ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
RETURNING id

-- name: job_unique_holder
-- An enqueue unique for a period, first step: the job that took the key within the period
-- (or the live job holding it), or NULL when the key is free; it waits for a concurrent
-- enqueue of the same key to commit (see chronoq_unique_holder_v1 in the schema).
SELECT chronoq_unique_holder_v1(%(key)s, %(unique_for)s * interval '1 second') AS id

-- name: job_unique_lock
-- A batch holding jobs unique for a period locks all their keys first, in the one order every
-- session uses, before it takes them one by one: two batches can then not deadlock.
SELECT chronoq_unique_lock_v1(%(keys)s::text[])

-- name: job_insert_unique
-- Second step, when the key was free: the job, and the record that it took the key, in one
-- statement. A keyed enqueue without a period may have taken the key meanwhile (it does not
-- wait on the lock): then nothing is inserted, and the caller asks job_unique_holder again.
WITH job AS (
    INSERT INTO chronoq_jobs (
        queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, misfire,
        misfire_grace, rate_key, trace_context)
    VALUES (
        %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s,
        coalesce(%(run_at)s, clock_timestamp() + %(delay)s * interval '1 second'),
        %(max_attempts)s, %(lease_seconds)s, %(key)s, %(misfire)s, %(misfire_grace)s,
        %(rate_key)s, %(trace_context)s::jsonb
    )
    ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
    RETURNING id, created_at
),
taken AS (
    INSERT INTO chronoq_unique_keys (key, job_id, enqueued_at, keep_until)
    SELECT %(key)s, job.id, job.created_at,
           job.created_at + %(unique_for)s * interval '1 second'
    FROM job
    ON CONFLICT (key) DO UPDATE
    SET job_id = excluded.job_id, enqueued_at = excluded.enqueued_at,
        keep_until = excluded.keep_until
)
SELECT id FROM job

-- name: job_reserve_ids
-- Ids handed out before a bulk insert, so each input row maps to its id without trusting the
-- order of RETURNING; the database clock is read in the same round trip. One array, in the order
-- nextval gave them: ascending, so that jobs enqueued together are claimed in the order given
-- (the caller sorts it all the same; sorting a sorted list costs it a pass, a sort here cost
-- the server more).
-- The sequence is looked up once (an uncorrelated subquery), not once per id: that look-up
-- costs several times the nextval itself.
WITH sequence AS MATERIALIZED (
    SELECT pg_get_serial_sequence('chronoq_jobs', 'id')::regclass AS name
)
SELECT ARRAY(SELECT nextval(sequence.name) FROM sequence, generate_series(1, %(count)s)) AS ids,
       clock_timestamp() AS now

-- name: job_insert_many
INSERT INTO chronoq_jobs (
    id, queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, misfire,
    misfire_grace, rate_key, trace_context)
SELECT * FROM unnest(
    %(ids)s::bigint[], %(queues)s::text[], %(tasks)s::text[], %(payloads)s::jsonb[],
    %(priorities)s::integer[], %(run_ats)s::timestamptz[], %(max_attempts)s::integer[],
    %(lease_seconds)s::float8[], %(keys)s::text[], %(misfires)s::text[],
    %(misfire_graces)s::float8[], %(rate_keys)s::text[], %(trace_contexts)s::jsonb[]
)
ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
RETURNING id

-- name: job_copy_start
-- Read before a COPY of jobs: the database clock their run_at counts from, and an id of the
-- jobs' sequence, taken and left unused, that every id the COPY takes after it in this session
-- exceeds (the lower end of job_copied_ids' range).
SELECT clock_timestamp() AS now, nextval(pg_get_serial_sequence('chronoq_jobs', 'id')) AS floor

-- name: job_copy_many
-- Binary: each value goes in its column's own wire format, which the client writes without
-- formatting text and the server reads without parsing it (timestamps above all). The columns'
-- types are given to the COPY in this order (COPY_TYPES in store.py). Each row takes its id
-- from the column's default as the server reads it: no id is reserved before the first row
-- can leave, so the caller's jobs are made while the server stores the rows already sent.
COPY chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, misfire,
    misfire_grace, rate_key, trace_context)
FROM STDIN (FORMAT BINARY)

-- name: job_copied_ids
-- The ids the COPY just gave its rows, in the order it read them: each row took nextval as it
-- was read, so they ascend in input order, above %(floor)s (job_copy_start) and up to this
-- session's currval. Other sessions' jobs in that range are told apart by the transaction that
-- inserted them: every row of one COPY has the xmin of the row that took the last id (a
-- subtransaction's, in a caller's savepoint). The rows are still uncommitted, so no other
-- session has updated them to a new xmin. Read through the primary key's index, in order.
WITH last AS MATERIALIZED (
    SELECT currval(pg_get_serial_sequence('chronoq_jobs', 'id')) AS id
)
SELECT ARRAY(
    SELECT jobs.id
    FROM chronoq_jobs jobs, last
    WHERE jobs.id > %(floor)s AND jobs.id <= last.id
      AND jobs.xmin = (SELECT newest.xmin FROM chronoq_jobs newest, last
                       WHERE newest.id = last.id)
    ORDER BY jobs.id
) AS ids

-- name: job_insert_tick
-- A schedule's tick: the unique (schedule, tick) index makes a second insert of the same tick,
-- by this scheduler or by another in a split brain, a no-op.
INSERT INTO chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, misfire, misfire_grace,
    schedule, tick, ticks)
VALUES (
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s, %(run_at)s, %(max_attempts)s,
    %(lease_seconds)s, %(misfire)s, %(misfire_grace)s, %(schedule)s, %(tick)s, %(ticks)s
)
ON CONFLICT (schedule, tick) WHERE schedule IS NOT NULL DO NOTHING
RETURNING id

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
--
-- No parameter reaches the planner: the clock, the limit (n) and the queues are read through
-- subqueries, so a custom plan is estimated no cheaper than the generic one, and PostgreSQL
-- keeps the prepared claim's generic plan instead of planning it at every execution (which
-- also probed the index for the range of run_at over every entry of the jobs claimed since the
-- last vacuum).
WITH RECURSIVE clock AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now, %(limit)s::integer AS n
),
-- DISTINCT: a queue named twice would be scanned twice and fill LIMIT with duplicates.
-- A paused queue is not claimed from; a limited one is claimed from under its row lock, by
-- the statements that follow this one (job_claim_limited_*), and is named in the result.
requested AS MATERIALIZED (
    SELECT DISTINCT u.name, coalesce(c.paused, false) AS paused,
           (c.rate IS NOT NULL OR c.concurrency IS NOT NULL
            OR EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = u.name)) AS limited
    FROM unnest((SELECT %(queues)s::text[])) AS u(name)
    LEFT JOIN chronoq_queues AS c ON c.name = u.name
),
-- Why the due rows are found priority by priority: chronoq_jobs_claim_idx is ordered by
-- priority first, so a scan of a queue's whole range with `run_at <= now` cannot stop at the
-- first row not yet due (a higher priority's rows come after it); each claim that came back
-- short read every pending row of the queue, due later or not. A scan per priority stops
-- there.
--
-- The distinct priorities of each open queue's pending jobs, lowest first: a loose index scan,
-- one descent per priority, that reads each priority from its latest run_at, away from the rows
-- claimed lately, whose index entries linger until vacuum. It starts below every integer and
-- stops after 11: a queue with more than 10 priorities pending is scanned whole as before, not
-- one descent per priority.
priorities AS (
    SELECT name AS queue, 0 AS depth, -2147483649 AS priority
    FROM requested
    WHERE NOT paused AND NOT limited
    UNION ALL
    SELECT p.queue, p.depth + 1,
           (SELECT j.priority FROM chronoq_jobs AS j
            WHERE j.status = 'pending' AND j.queue = p.queue AND j.priority > p.priority
            ORDER BY j.priority LIMIT 1)
    FROM priorities AS p
    WHERE p.priority IS NOT NULL AND p.depth <= 10
),
ranked AS MATERIALIZED (
    SELECT queue, priority FROM priorities WHERE depth > 0 AND priority IS NOT NULL
    ORDER BY queue, priority DESC
),
open_queues AS MATERIALIZED (
    SELECT q.name, (SELECT count(*) FROM ranked AS r WHERE r.queue = q.name) > 10 AS many
    FROM requested AS q
    WHERE NOT q.paused AND NOT q.limited
),
due AS (
    SELECT c.id,
           -- Later than its grace with the policy "skip": skipped, not started.
           (c.misfire = 'skip'
            AND c.run_at + c.misfire_grace * interval '1 second' < clock.now) AS expired
    FROM clock, open_queues AS q,
    LATERAL (
        -- Priority by priority, highest first (ranked is read in its order): LIMIT without
        -- ORDER BY stops taking and locking rows once the highest priorities gave enough.
        (SELECT one.*
         FROM ranked AS r,
         LATERAL (
             SELECT id, priority, run_at, misfire, misfire_grace
             FROM chronoq_jobs
             WHERE status = 'pending'
               AND queue = r.queue
               AND priority = r.priority
               AND run_at <= clock.now
             ORDER BY run_at, id
             LIMIT (SELECT n FROM clock)
             FOR UPDATE SKIP LOCKED
         ) AS one
         WHERE r.queue = q.name AND NOT q.many
         LIMIT (SELECT n FROM clock))
        UNION ALL
        -- A queue with many priorities: its whole range in claim order.
        SELECT * FROM (
            SELECT id, priority, run_at, misfire, misfire_grace
            FROM chronoq_jobs
            WHERE q.many
              AND status = 'pending'
              AND queue = q.name
              AND run_at <= clock.now
            ORDER BY priority DESC, run_at, id
            LIMIT (SELECT n FROM clock)
            FOR UPDATE SKIP LOCKED
        ) AS whole
    ) AS c
    -- Merges at most limit x queues rows: a worker serving several queues never sorts a
    -- whole backlog.
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT (SELECT n FROM clock)
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
WHERE j.id = due.id AND NOT due.expired
RETURNING j.*
),
skipped AS (
    UPDATE chronoq_jobs AS j
    SET status = 'skipped', finished_at = clock.now
    FROM due, clock
    WHERE j.id = due.id AND due.expired
    RETURNING j.id
),
-- Materialized: evaluated once, not once per claimed row it is joined to.
wakeup AS MATERIALIZED (
    SELECT clock.now AS wakeup_db_now,
           -- Skipped rows took places in LIMIT that due jobs behind them may want: look again.
           CASE WHEN EXISTS (SELECT 1 FROM skipped) THEN clock.now ELSE
           (SELECT min(first_due.run_at)
            FROM (SELECT name FROM requested WHERE NOT paused) AS q,
            LATERAL (SELECT run_at FROM chronoq_jobs
                WHERE status = 'pending' AND queue = q.name AND run_at > clock.now
                ORDER BY run_at LIMIT 1) AS first_due) END AS wakeup_next_run_at,
           (SELECT locked_until FROM chronoq_jobs WHERE status = 'running'
            ORDER BY locked_until LIMIT 1) AS wakeup_next_lease_expiry,
           (SELECT array_agg(name ORDER BY name) FROM requested WHERE limited AND NOT paused)
           AS wakeup_limited
    FROM clock
)
SELECT claimed.*, wakeup.*
FROM wakeup LEFT JOIN claimed ON true

-- name: job_claim_limited_lock
-- Claims from limited queues run in one transaction that starts here: the queues' rows are
-- locked (in name order, so two claimers never deadlock) and every later statement of the claim
-- sees what the previous holder committed. Their buckets are read and charged under the lock.
SELECT name, rate, burst, concurrency, tokens, refilled_at
FROM chronoq_queues
WHERE name = ANY(%(queues)s::text[]) AND NOT paused
ORDER BY name
FOR UPDATE

-- name: job_claim_limited_candidates
SELECT id, rate_key,
       (misfire = 'skip' AND run_at + misfire_grace * interval '1 second' < %(now)s) AS expired
FROM chronoq_jobs
WHERE status = 'pending' AND queue = %(queue)s AND run_at <= %(now)s
ORDER BY priority DESC, run_at, id
LIMIT %(scan)s
FOR UPDATE SKIP LOCKED

-- name: job_claim_limited_running
SELECT count(*) AS running FROM chronoq_jobs WHERE status = 'running' AND queue = %(queue)s

-- name: job_claim_limited_key_limits
SELECT pattern, rate, burst FROM chronoq_key_limits WHERE queue = %(queue)s ORDER BY pattern

-- name: job_claim_limited_key_buckets
SELECT key, tokens, refilled_at FROM chronoq_key_buckets
WHERE queue = %(queue)s AND key = ANY(%(keys)s::text[])

-- name: job_claim_ids
-- The UPDATE of job_claim for rows already chosen and locked by this transaction.
UPDATE chronoq_jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    lease_token = j.lease_token + 1,
    worker_id = %(worker_id)s,
    started_at = %(now)s,
    max_attempts = coalesce(
        j.max_attempts, (%(max_attempts)s::jsonb ->> j.task)::integer, %(default_max_attempts)s),
    lease_seconds = coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds),
    locked_until = %(now)s::timestamptz
        + coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds) * interval '1 second'
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status = 'pending'
RETURNING j.*

-- name: job_claim_staged
-- Tiered dispatch: a worker confirms the stream entries it read, each a job id with the lease
-- token its leader staged it with. In one statement every distinct id gets a verdict, and each
-- job still pending with that token, due on the database clock (read once), in a queue neither
-- paused nor limited, starts its attempt exactly as in job_claim.
--
-- The rows to start are locked in id order with SKIP LOCKED. SKIP LOCKED: a row another
-- transaction holds (a claim from the database path, a cancel, another worker confirming the
-- same entry after a redelivery) is reported busy at once instead of waited for. Id order: two
-- workers confirming overlapping batches, whatever order their entries arrived in, lock their
-- common rows in the same order, so not even a lock that did wait could close a cycle.
--
-- Verdicts: 'job' (started; the job's columns follow), 'gone' for a `skip` misfire past its
-- grace (now skipped, as the claim does), and for the rows not locked here, from this
-- statement's snapshot: 'busy' (startable, but locked by another transaction, or changed by
-- one since the snapshot: ask again), 'early' (pending with that token in an open queue, not
-- due yet: early_run_at says when) and 'gone' (missing, not pending, another token, a paused
-- or limited queue). A limited queue's jobs are claimed by the database path under its limits;
-- starting them here would bypass those. There is always one row, for db_now.
WITH clock AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
),
given AS MATERIALIZED (
    SELECT DISTINCT g.id, g.token
    FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS g(id, token)
),
seen AS MATERIALIZED (
    SELECT j.id, j.run_at, j.run_at <= clock.now AS due,
           (j.status = 'pending'
            AND EXISTS (SELECT 1 FROM given AS g WHERE g.id = j.id AND g.token = j.lease_token)
            AND NOT coalesce(c.paused OR c.rate IS NOT NULL OR c.concurrency IS NOT NULL, false)
            AND NOT EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = j.queue))
               AS open
    FROM clock, chronoq_jobs AS j
    LEFT JOIN chronoq_queues AS c ON c.name = j.queue
    WHERE j.id IN (SELECT id FROM given)
),
locked AS (
    SELECT j.id,
           (j.misfire = 'skip'
            AND j.run_at + j.misfire_grace * interval '1 second' < clock.now) AS expired
    FROM clock, chronoq_jobs AS j
    WHERE j.id IN (SELECT id FROM seen WHERE open AND due)
      -- Checked again on the row as it is when locked, should it have changed meanwhile.
      AND j.status = 'pending'
      AND j.run_at <= clock.now
      AND EXISTS (SELECT 1 FROM given AS g WHERE g.id = j.id AND g.token = j.lease_token)
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
),
claimed AS (
UPDATE chronoq_jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    lease_token = j.lease_token + 1,
    worker_id = %(worker_id)s,
    started_at = clock.now,
    max_attempts = coalesce(
        j.max_attempts, (%(max_attempts)s::jsonb ->> j.task)::integer, %(default_max_attempts)s),
    lease_seconds = coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds),
    locked_until = clock.now
        + coalesce((%(leases)s::jsonb ->> j.task)::float8, j.lease_seconds) * interval '1 second'
FROM locked, clock
WHERE j.id = locked.id AND NOT locked.expired
RETURNING j.*
),
skipped AS (
    UPDATE chronoq_jobs AS j
    SET status = 'skipped', finished_at = clock.now
    FROM locked, clock
    WHERE j.id = locked.id AND locked.expired
    RETURNING j.id
),
verdicts AS (
    SELECT ids.id AS given_id,
           CASE WHEN EXISTS (SELECT 1 FROM claimed WHERE claimed.id = ids.id) THEN 'job'
                WHEN EXISTS (SELECT 1 FROM skipped WHERE skipped.id = ids.id) THEN 'gone'
                WHEN seen.open AND seen.due THEN 'busy'
                WHEN seen.open THEN 'early'
                ELSE 'gone' END AS verdict,
           seen.run_at AS early_run_at
    FROM (SELECT DISTINCT id FROM given) AS ids
    LEFT JOIN seen ON seen.id = ids.id
)
SELECT clock.now AS db_now, verdicts.verdict, verdicts.given_id, verdicts.early_run_at,
       claimed.*
FROM clock
LEFT JOIN verdicts ON true
LEFT JOIN claimed ON claimed.id = verdicts.given_id

-- name: job_stage_candidates
-- Tiered dispatch: pending jobs of some partitions (a job's partition is its id modulo the
-- count) due within the horizon, in id order after a cursor, for a leader to stage.
--
-- Queue by queue: pending_queues walks chronoq_jobs_next_due_idx (queue, run_at) one queue
-- at a time (a loose index scan, one descent per queue), paused and limited queues are dropped,
-- and each open queue's near-due jobs are one range scan of that index. A due backlog waiting
-- in a paused or rate-limited queue is never read, and enqueues pay for no extra index. The
-- OFFSET 0 keeps each queue's scan a scan of its own (the planner would otherwise merge it into
-- a join it may answer by walking the primary key in id order, reading every pending row).
--
-- The horizon's end is computed from statement_timestamp(), not clock_timestamp(): a volatile
-- bound cannot be an index condition, nor be estimated. Both are read at the statement's start
-- and it returns that instant as db_now. The store runs this statement unprepared, so that it
-- is always planned with the bound known. There is always one row, for db_now.
WITH RECURSIVE pending_queues AS (
    (SELECT queue FROM chronoq_jobs WHERE status = 'pending' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM chronoq_jobs AS j
            WHERE j.status = 'pending' AND j.queue > p.queue
            ORDER BY j.queue LIMIT 1)
    FROM pending_queues AS p
    WHERE p.queue IS NOT NULL
),
open_queues AS MATERIALIZED (
    SELECT p.queue
    FROM pending_queues AS p
    WHERE p.queue IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM chronoq_queues AS c
          WHERE c.name = p.queue AND (c.paused OR c.rate IS NOT NULL OR c.concurrency IS NOT NULL))
      AND NOT EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = p.queue)
),
candidates AS (
    SELECT c.id, c.lease_token, c.queue, c.run_at
    FROM open_queues AS o
    CROSS JOIN LATERAL (
        SELECT j.id, j.lease_token, j.queue, j.run_at
        FROM chronoq_jobs AS j
        WHERE j.status = 'pending'
          AND j.queue = o.queue
          AND j.run_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
                          + %(horizon)s * interval '1 second'
          AND j.id > %(after_id)s
          AND mod(j.id, %(partition_count)s) = ANY(%(partitions)s::bigint[])
        OFFSET 0
    ) AS c
    ORDER BY c.id
    LIMIT %(limit)s
)
SELECT coalesce(%(now)s::timestamptz, statement_timestamp()) AS db_now, candidates.*
FROM (VALUES (1)) AS one
LEFT JOIN candidates ON true
ORDER BY candidates.id

-- name: job_skip_ids
UPDATE chronoq_jobs SET status = 'skipped', finished_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending'

-- name: job_defer_many
-- Jobs held back by their rate key's bucket wait for the instant it has a token for them.
UPDATE chronoq_jobs AS j
SET run_at = d.run_at
FROM unnest(%(ids)s::bigint[], %(run_ats)s::timestamptz[]) AS d(id, run_at)
WHERE j.id = d.id AND j.status = (SELECT 'pending')

-- name: job_finish_many
-- Fenced: a row whose token moved on (the lease expired and someone else claimed it) or whose
-- status is no longer running is left alone, and its id is missing from the result. One
-- exception: a cancelled outcome of an attempt whose job was cancelled while it ran (the cancel
-- keeps the token) is recorded, so the attempt joins the history; the job stays cancelled, as of
-- the cancel. An error joins the history stamped by the store with the attempt it belongs to,
-- its start and its end; the clock is read once so that end equals finished_at. A done outcome
-- stores the handler's output (JSON text, or NULL); a retry clears the attempt's progress.
WITH clock AS MATERIALIZED (
    SELECT clock_timestamp() AS now
),
outcome AS (
    SELECT *
    FROM unnest(
        %(ids)s::bigint[], %(tokens)s::bigint[], %(outcomes)s::text[],
        %(delays)s::float8[], %(errors)s::jsonb[], %(keeps)s::bool[], %(outputs)s::text[]
    ) AS o(id, token, outcome, delay, error, keep, output)
)
UPDATE chronoq_jobs AS j
SET status = CASE WHEN o.outcome = 'retry' THEN 'pending' ELSE o.outcome END,
    run_at = CASE WHEN o.outcome <> 'retry' OR (o.keep AND j.misfire <> 'skip') THEN j.run_at
                  ELSE clock.now + o.delay * interval '1 second' END,
    locked_until = NULL,
    finished_at = CASE WHEN o.outcome = 'retry' THEN NULL
                       WHEN j.status = 'cancelled' THEN j.finished_at
                       ELSE clock.now END,
    errors = CASE WHEN o.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(o.error || jsonb_build_object(
                      'attempt', j.attempts, 'started_at', j.started_at,
                      'finished_at', clock.now))
             END,
    output = CASE WHEN o.outcome = 'done' THEN o.output::jsonb ELSE j.output END,
    progress = CASE WHEN o.outcome = 'retry' THEN NULL ELSE j.progress END,
    progress_note = CASE WHEN o.outcome = 'retry' THEN NULL ELSE j.progress_note END
FROM outcome AS o, clock
WHERE j.id = o.id AND j.lease_token = o.token
  AND (j.status = (SELECT 'running')
       OR (j.status = (SELECT 'cancelled') AND j.worker_id IS NOT NULL
           AND o.outcome = 'cancelled'))
RETURNING j.id

-- name: job_complete_many
-- The common batch, every attempt done with no output and nothing to record: job_finish_many's
-- effect for the outcome 'done', with two arrays to send instead of seven and no per-row CASE to
-- evaluate. Fenced the same way; a cancelled job is left alone (a done outcome never joins its
-- history).
WITH clock AS MATERIALIZED (
    SELECT clock_timestamp() AS now
)
UPDATE chronoq_jobs AS j
SET status = 'done', locked_until = NULL, finished_at = clock.now, output = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS o(id, token), clock
WHERE j.id = o.id AND j.lease_token = o.token AND j.status = (SELECT 'running')
RETURNING j.id

-- name: job_complete_in
UPDATE chronoq_jobs
SET status = 'done', locked_until = NULL, finished_at = clock_timestamp(),
    output = %(output)s::text::jsonb
WHERE id = %(id)s AND lease_token = %(token)s AND status = 'running'
RETURNING id

-- name: job_heartbeat_many
-- Renews the leases of running attempts, and names (by their status) the attempts whose job was
-- cancelled while they ran: a cancel keeps the token and the worker of a running job (see
-- job_cancel), and a cancelled job is never claimed again, so the token still names the
-- attempt, whose worker then stops it. A cancelled row is matched
-- by the UPDATE rather than read beside it: a cancel that commits while this statement waits for
-- the row's lock is then seen (the row is re-checked after the wait), and the attempt is never
-- taken for lost. Its lease stays cleared. A running attempt's progress rides along (NULL: none
-- reported since its last heartbeat), fenced like the lease.
UPDATE chronoq_jobs AS j
SET locked_until = CASE WHEN j.status = 'running'
                        THEN clock_timestamp() + j.lease_seconds * interval '1 second'
                        ELSE j.locked_until END,
    progress = CASE WHEN j.status = 'running' AND r.progress IS NOT NULL
                    THEN r.progress ELSE j.progress END,
    progress_note = CASE WHEN j.status = 'running' AND r.progress IS NOT NULL
                         THEN r.note ELSE j.progress_note END
FROM unnest(
    %(ids)s::bigint[], %(tokens)s::bigint[], %(progress)s::float8[], %(notes)s::text[]
) AS r(id, token, progress, note)
WHERE j.id = r.id AND j.lease_token = r.token
  AND (j.status = (SELECT 'running')
       OR (j.status = (SELECT 'cancelled') AND j.worker_id IS NOT NULL))
RETURNING j.id, j.status

-- name: job_cancelled_among
-- Of the attempts named, those whose job was cancelled while they held it (see
-- job_heartbeat_many): asked only about results the store refused.
SELECT j.id
FROM chronoq_jobs AS j
JOIN unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
    ON j.id = r.id AND j.lease_token = r.token
WHERE j.status = 'cancelled' AND j.worker_id IS NOT NULL

-- name: job_fence_rejected
-- Counts writes refused because a newer claim moved the token on (the writer lost the job). A
-- write refused with the current token (a heartbeat that crossed its job's report) is not a
-- fencing rejection and is not counted.
UPDATE chronoq_jobs AS j
SET fence_rejections = j.fence_rejections + 1
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token > r.token

-- name: job_release_many
-- The job never started here, so the attempt the claim counted is given back.
UPDATE chronoq_jobs AS j
SET status = 'pending', attempts = j.attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.status = (SELECT 'running')
RETURNING j.id

-- name: job_hand_off_many
-- Like job_release_many, and due again only after `delay`: the worker that gives it back does
-- not know its task, and would claim it again at once.
UPDATE chronoq_jobs AS j
SET status = 'pending', attempts = j.attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL,
    run_at = greatest(j.run_at, clock_timestamp() + %(delay)s * interval '1 second')
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.status = (SELECT 'running')
RETURNING j.id

-- name: job_rescue_expired
-- A running job whose lease ended belongs to a worker that died or stalled. It runs again at
-- once, or goes dead if that was its last attempt; the expiry joins its error history. SKIP
-- LOCKED keeps rescuers on several workers from blocking each other. It keeps its run_at, and so
-- its place in line ahead of jobs that fell due after it: a backlog does not delay the re-run of
-- work a crash interrupted. A job whose misfire policy is "skip" started within its grace, so
-- its grace starts again now rather than skipping it on its re-run.
WITH clock AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
),
expired AS (
    -- The clock through a subquery: a bound of the lease index's scan, which stops at the first
    -- lease not yet expired. Joined, it filtered every running job's entry.
    SELECT id
    FROM chronoq_jobs
    WHERE status = 'running' AND locked_until < (SELECT now FROM clock)
    ORDER BY locked_until
    LIMIT %(limit)s
    FOR UPDATE OF chronoq_jobs SKIP LOCKED
)
UPDATE chronoq_jobs AS j
SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    run_at = CASE WHEN j.misfire = 'skip' THEN clock.now ELSE j.run_at END,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN clock.now END,
    locked_until = NULL,
    worker_id = NULL,
    progress = NULL,
    progress_note = NULL,
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
       (SELECT locked_until FROM chronoq_jobs WHERE status = 'running'
        ORDER BY locked_until LIMIT 1) AS next_lease_expiry

-- name: job_get
SELECT * FROM chronoq_jobs WHERE id = %(id)s

-- name: job_watch
-- A waiter marks the job it is about to wait for, already listening: its finish is notified
-- (chronoq_notify_finished_v2). Under the row's lock: a finish under way is waited for, and the
-- job it leaves final is not marked; a finish after the mark sees it. Either way the waiter's
-- next read, or the notification, shows the end.
UPDATE chronoq_jobs SET finish_watched = true
WHERE id = %(id)s AND status IN ('pending', 'running') AND NOT finish_watched

-- name: job_list
SELECT * FROM chronoq_jobs
WHERE (cardinality(%(statuses)s::text[]) = 0 OR status = ANY(%(statuses)s::text[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(worker)s::text IS NULL OR worker_id = %(worker)s::text)
  AND (%(key)s::text IS NULL OR key = %(key)s::text)
  AND (%(created_after)s::timestamptz IS NULL OR created_at >= %(created_after)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR created_at < %(created_before)s::timestamptz)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: job_cancel
-- A running job keeps its worker and its token: that attempt's heartbeat then learns of the
-- cancel (see job_heartbeat_many). A pending one has no owner: whoever held it last (an attempt
-- that failed and waits for its retry, say) is forgotten, so a cancelled job with a worker is
-- exactly one that was cancelled while it ran.
UPDATE chronoq_jobs
SET status = 'cancelled', locked_until = NULL, finished_at = clock_timestamp(),
    worker_id = CASE WHEN status = 'running' THEN worker_id END
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
      AND (%(task)s::text IS NULL OR d.task = %(task)s::text)
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
  AND (%(task)s::text IS NULL OR task = %(task)s::text)

-- name: job_ids_existing
-- Which of the ids given a job has, whatever its status (a requeue tells unknown ids apart).
SELECT id FROM chronoq_jobs WHERE id = ANY(%(ids)s::bigint[])

-- name: dead_purge
DELETE FROM chronoq_jobs
WHERE status = 'dead'
  AND finished_at <= clock_timestamp() - %(older_than)s * interval '1 second'
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(all)s OR id = ANY(%(ids)s::bigint[]))

-- name: stats
SELECT queue, status, count(*) AS count
FROM chronoq_jobs
GROUP BY queue, status
-- Byte order, as on SQLite, whatever the cluster's collation.
ORDER BY queue COLLATE "C", status

-- name: overview_queues
-- Every queue with live or dead jobs, or settings: pending, due now, running and dead counts,
-- and how long its oldest due job has waited. The oldest due run_at comes from the claim index.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
counts AS (
    SELECT queue,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'pending' AND run_at <= clock.now) AS due,
           count(*) FILTER (WHERE status = 'running') AS running,
           count(*) FILTER (WHERE status = 'dead') AS dead
    FROM chronoq_jobs, clock
    WHERE status IN ('pending', 'running', 'dead')
    GROUP BY queue
),
names AS (
    SELECT queue AS name FROM counts UNION SELECT name FROM chronoq_queues
)
SELECT names.name AS queue,
       coalesce(c.pending, 0) AS pending, coalesce(c.due, 0) AS due,
       coalesce(c.running, 0) AS running, coalesce(c.dead, 0) AS dead,
       coalesce(extract(epoch FROM clock.now - (
           SELECT min(run_at) FROM chronoq_jobs AS j
           WHERE j.status = 'pending' AND j.queue = names.name AND j.run_at <= clock.now
       )), 0)::float8 AS oldest_due_age,
       clock.now AS db_now
FROM names CROSS JOIN clock LEFT JOIN counts AS c ON c.queue = names.name
ORDER BY names.name COLLATE "C"

-- name: overview_finished
-- Jobs that ended in the window, counted per queue, status and bucket, and done jobs also by
-- their due→start lateness (the number of bounds at or below it: width_bucket's answer). The
-- window starts at a parameter, a bucket's start on the clock overview_queues read, not at
-- clock_timestamp(): a volatile bound cannot be an index condition, and the finished index is
-- what keeps this cheap.
SELECT queue, status,
       to_timestamp(floor(extract(epoch FROM finished_at) / %(bucket)s) * %(bucket)s) AS start,
       CASE WHEN status = 'done' AND started_at IS NOT NULL
            THEN width_bucket(extract(epoch FROM started_at - run_at)::float8,
                              %(bounds)s::float8[])
       END AS lateness_bucket,
       count(*) AS count
FROM chronoq_jobs
WHERE finished_at >= %(since)s::timestamptz
GROUP BY 1, 2, 3, 4

-- name: job_prune
-- Finished jobs past their retention go in batches, oldest first; dead jobs stay for
-- inspection. Tick jobs go too: the schedule's cursor, not the row, keeps a tick from firing
-- again.
DELETE FROM chronoq_jobs
WHERE id IN (
    SELECT id FROM chronoq_jobs
    WHERE status IN ('done', 'cancelled', 'skipped')
      AND finished_at < clock_timestamp() - %(older_than)s * interval '1 second'
    ORDER BY finished_at
    LIMIT %(limit)s
)

-- name: unique_keys_prune
-- A key's record goes once the longest period asked of it has passed.
DELETE FROM chronoq_unique_keys WHERE keep_until <= clock_timestamp()
