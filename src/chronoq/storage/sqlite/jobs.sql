-- SQLite: chronoq_jobs — enqueue, claim, finish, leases, inspection, dead letters.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Times are integer microseconds since the epoch (UTC); :now is the store's clock reading
-- taken inside the write transaction (the host clock is the database clock of an embedded
-- database). Batches arrive as JSON arrays and are unpacked with json_each.

-- name: job_insert
INSERT INTO chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, created_at, misfire,
    misfire_grace, rate_key, trace_context)
VALUES (
    :queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :key, :now,
    :misfire, :misfire_grace, :rate_key, :trace_context)
ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
RETURNING id

-- name: job_next_id
-- The id AUTOINCREMENT would hand out next: past every id ever used, even deleted ones.
SELECT max(
    coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chronoq_jobs'), 0),
    coalesce((SELECT max(id) FROM chronoq_jobs), 0)
) + 1

-- name: job_insert_with_id
INSERT INTO chronoq_jobs (
    id, queue, task, payload, priority, run_at, max_attempts, lease_seconds, created_at, misfire,
    misfire_grace, rate_key, trace_context)
VALUES (
    :id, :queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :now,
    :misfire, :misfire_grace, :rate_key, :trace_context)

-- name: job_insert_tick
-- A schedule's tick: the unique (schedule, tick) index makes a second insert a no-op.
INSERT INTO chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, misfire, misfire_grace,
    schedule, tick, ticks, created_at)
VALUES (
    :queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :misfire,
    :misfire_grace, :schedule, :tick, :ticks, :now)
ON CONFLICT (schedule, tick) WHERE schedule IS NOT NULL DO NOTHING
RETURNING id

-- name: job_live_id_by_key
SELECT id FROM chronoq_jobs WHERE key = :key AND status IN ('pending', 'running')

-- name: job_unique_taker
-- The job that took the key with `unique_for` within :period of now (an enqueue unique for a
-- period returns it, whatever its status, even pruned). The write transaction serialises
-- concurrent enqueues of the key, in this process and in others.
SELECT job_id FROM chronoq_unique_keys WHERE key = :key AND enqueued_at > :now - :period

-- name: job_unique_keep
-- The record is kept until the end of the longest period asked of it.
UPDATE chronoq_unique_keys SET keep_until = max(keep_until, enqueued_at + :period)
WHERE key = :key

-- name: job_live_by_key
SELECT id, created_at FROM chronoq_jobs WHERE key = :key AND status IN ('pending', 'running')

-- name: job_unique_record
INSERT INTO chronoq_unique_keys (key, job_id, enqueued_at, keep_until)
VALUES (:key, :job_id, :enqueued_at, :enqueued_at + :period)
ON CONFLICT (key) DO UPDATE
SET job_id = excluded.job_id, enqueued_at = excluded.enqueued_at,
    keep_until = excluded.keep_until

-- name: job_skip_expired
-- Due jobs of one open queue with the misfire policy "skip" that are later than their grace,
-- among the first `limit` in claim order, end skipped before the claim, so they take no place
-- in its LIMIT. INDEXED BY (here and below): without statistics (chronoq never runs ANALYZE)
-- SQLite prefers chronoq_jobs_status_idx, and would read every pending job and sort them at
-- every claim; chronoq_jobs_claim_idx gives them in claim order, one range scan.
UPDATE chronoq_jobs
SET status = 'skipped', finished_at = :now
WHERE id IN (
    SELECT id FROM chronoq_jobs INDEXED BY chronoq_jobs_claim_idx
    WHERE status = 'pending' AND queue = :queue AND run_at <= :now
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
  AND misfire = 'skip' AND run_at + CAST(misfire_grace * 1000000 AS INTEGER) < :now

-- name: job_claim_queue
-- Starts the first `limit` due jobs of one open queue in claim order. It runs inside BEGIN
-- IMMEDIATE: the write lock is taken before the read, so two processes can never pick the same
-- rows (SQLite's stand-in for FOR UPDATE SKIP LOCKED). The worker's settings for its tasks are
-- unpacked once per statement into two small tables, not from their JSON once per row.
WITH lease AS MATERIALIZED (SELECT key AS task, value FROM json_each(:leases)),
attempts AS MATERIALIZED (SELECT key AS task, value FROM json_each(:max_attempts))
UPDATE chronoq_jobs
SET status = 'running',
    attempts = attempts + 1,
    lease_token = lease_token + 1,
    worker_id = :worker_id,
    started_at = :now,
    max_attempts = coalesce(
        max_attempts,
        (SELECT value FROM attempts WHERE attempts.task = chronoq_jobs.task),
        :default_max_attempts),
    lease_seconds = coalesce(
        (SELECT value FROM lease WHERE lease.task = chronoq_jobs.task), lease_seconds),
    locked_until = :now + CAST(coalesce(
        (SELECT value FROM lease WHERE lease.task = chronoq_jobs.task), lease_seconds
    ) * 1000000 AS INTEGER)
WHERE id IN (
    SELECT id FROM chronoq_jobs INDEXED BY chronoq_jobs_claim_idx
    WHERE status = 'pending' AND queue = :queue AND run_at <= :now
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
RETURNING *

-- name: job_due_in_queue
-- A worker serving several open queues: each queue's first `limit` due jobs in claim order
-- (chronoq_jobs_claim_idx covers them), merged by the store to learn how many to claim from
-- each with job_claim_queue, so the claim takes the first `limit` of all of them together.
SELECT priority, run_at, id FROM chronoq_jobs INDEXED BY chronoq_jobs_claim_idx
WHERE status = 'pending' AND queue = :queue AND run_at <= :now
ORDER BY priority DESC, run_at, id
LIMIT :limit

-- name: job_claim_limited_lock
-- The write transaction already serialises claims; this reads the limited queues' state.
SELECT name, rate, burst, concurrency, tokens, refilled_at
FROM chronoq_queues
WHERE name IN (SELECT value FROM json_each(:queues)) AND NOT paused
ORDER BY name

-- name: job_claim_limited_candidates
SELECT id, rate_key,
       (misfire = 'skip' AND run_at + CAST(misfire_grace * 1000000 AS INTEGER) < :now)
           AS expired
FROM chronoq_jobs
WHERE status = 'pending' AND queue = :queue AND run_at <= :now
ORDER BY priority DESC, run_at, id
LIMIT :scan

-- name: job_claim_limited_running
SELECT count(*) AS running FROM chronoq_jobs WHERE status = 'running' AND queue = :queue

-- name: job_claim_limited_key_limits
SELECT pattern, rate, burst FROM chronoq_key_limits WHERE queue = :queue ORDER BY pattern

-- name: job_claim_limited_key_buckets
SELECT key, tokens, refilled_at FROM chronoq_key_buckets
WHERE queue = :queue AND key IN (SELECT value FROM json_each(:keys))

-- name: job_claim_ids
UPDATE chronoq_jobs
SET status = 'running',
    attempts = attempts + 1,
    lease_token = lease_token + 1,
    worker_id = :worker_id,
    started_at = :now,
    max_attempts = coalesce(
        max_attempts,
        (SELECT value FROM json_each(:max_attempts) WHERE key = chronoq_jobs.task),
        :default_max_attempts),
    lease_seconds = coalesce(
        (SELECT value FROM json_each(:leases) WHERE key = chronoq_jobs.task), lease_seconds),
    locked_until = :now + CAST(coalesce(
        (SELECT value FROM json_each(:leases) WHERE key = chronoq_jobs.task), lease_seconds
    ) * 1000000 AS INTEGER)
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'
RETURNING *

-- name: job_claim_staged_verdicts
-- Tiered dispatch (see job_claim_staged in the PostgreSQL queries): one verdict for each
-- distinct id of the [id, token] pairs given. It runs in the write transaction that then starts
-- the 'start' jobs (job_claim_ids) and skips the 'skip' ones (job_skip_ids), so nothing changes
-- in between: SQLite's single writer stands in for SKIP LOCKED, and no job is ever busy.
-- 'early': pending with that token in an open queue, not due yet; 'gone': anything else
-- without a job to start (missing, not pending, another token, a paused or limited queue).
WITH given AS (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token
    FROM json_each(:refs)
)
SELECT ids.id,
       CASE
           WHEN j.id IS NULL
                OR j.status <> 'pending'
                OR NOT EXISTS (
                    SELECT 1 FROM given AS g WHERE g.id = j.id AND g.token = j.lease_token)
                OR coalesce(c.paused OR c.rate IS NOT NULL OR c.concurrency IS NOT NULL, 0)
                OR EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = j.queue)
               THEN 'gone'
           WHEN j.run_at > :now THEN 'early'
           WHEN j.misfire = 'skip'
                AND j.run_at + CAST(j.misfire_grace * 1000000 AS INTEGER) < :now
               THEN 'skip'
           ELSE 'start'
       END AS verdict,
       j.run_at
FROM (SELECT DISTINCT id FROM given) AS ids
LEFT JOIN chronoq_jobs AS j ON j.id = ids.id
LEFT JOIN chronoq_queues AS c ON c.name = j.queue

-- name: job_stage_candidates
-- Tiered dispatch: pending jobs of some partitions (id modulo the count) due within the
-- horizon, in id order after a cursor. As on PostgreSQL, the open queues are found one index
-- descent at a time (chronoq_jobs_next_due_idx) and only their near-due ranges are read, never
-- the backlog of a paused or limited queue. INDEXED BY: without statistics (chronoq never runs
-- ANALYZE) SQLite prefers chronoq_jobs_status_idx here, and reads every pending job.
WITH RECURSIVE pending_queues(queue) AS (
    SELECT (SELECT queue FROM chronoq_jobs INDEXED BY chronoq_jobs_next_due_idx
            WHERE status = 'pending' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM chronoq_jobs AS j INDEXED BY chronoq_jobs_next_due_idx
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
)
SELECT j.id, j.lease_token, j.queue, j.run_at
FROM chronoq_jobs AS j INDEXED BY chronoq_jobs_next_due_idx
WHERE j.status = 'pending'
  AND j.queue IN (SELECT queue FROM open_queues)
  AND j.run_at <= :now + :horizon
  AND j.id > :after_id
  AND j.id % :partition_count IN (SELECT value FROM json_each(:partitions))
ORDER BY j.id
LIMIT :limit

-- name: job_skip_ids
UPDATE chronoq_jobs SET status = 'skipped', finished_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'

-- name: job_defer_many
UPDATE chronoq_jobs NOT INDEXED
SET run_at = d.run_at
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS run_at
      FROM json_each(:deferrals)) AS d
WHERE chronoq_jobs.id = d.id AND chronoq_jobs.status = 'pending'

-- name: job_finish_many
-- Fenced: a row whose token moved on or that is no longer running is left alone, and its id is
-- missing from the result, but for a cancelled outcome of an attempt whose job was cancelled
-- while it ran (see the PostgreSQL query). An error joins the history stamped by the store with the attempt it
-- belongs to and its start and end, as ISO 8601 UTC with microseconds (the form PostgreSQL writes).
UPDATE chronoq_jobs NOT INDEXED
SET status = CASE WHEN o.outcome = 'retry' THEN 'pending' ELSE o.outcome END,
    run_at = CASE WHEN o.outcome <> 'retry' OR (o.keep AND chronoq_jobs.misfire <> 'skip')
                  THEN chronoq_jobs.run_at
                  ELSE :now + CAST(o.delay * 1000000 AS INTEGER) END,
    locked_until = NULL,
    finished_at = CASE WHEN o.outcome = 'retry' THEN NULL
                       WHEN chronoq_jobs.status = 'cancelled' THEN chronoq_jobs.finished_at
                       ELSE :now END,
    errors = CASE WHEN o.error IS NULL THEN chronoq_jobs.errors
                  ELSE json_insert(chronoq_jobs.errors, '$[#]', json_set(json(o.error),
                      '$.attempt', chronoq_jobs.attempts,
                      '$.started_at',
                          strftime('%Y-%m-%dT%H:%M:%S', chronoq_jobs.started_at / 1000000, 'unixepoch')
                          || printf('.%06d+00:00', chronoq_jobs.started_at % 1000000),
                      '$.finished_at',
                          strftime('%Y-%m-%dT%H:%M:%S', :now / 1000000, 'unixepoch')
                          || printf('.%06d+00:00', :now % 1000000)))
             END,
    output = CASE WHEN o.outcome = 'done' THEN o.output ELSE chronoq_jobs.output END,
    progress = CASE WHEN o.outcome = 'retry' THEN NULL ELSE chronoq_jobs.progress END,
    progress_note = CASE WHEN o.outcome = 'retry' THEN NULL ELSE chronoq_jobs.progress_note END
FROM (
    SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
           json_extract(value, '$.outcome') AS outcome, json_extract(value, '$.delay') AS delay,
           json_extract(value, '$.error') AS error, json_extract(value, '$.keep') AS keep,
           json_extract(value, '$.output') AS output
    FROM json_each(:items)
) AS o
WHERE chronoq_jobs.id = o.id AND chronoq_jobs.lease_token = o.token
  AND (chronoq_jobs.status = 'running'
       OR (chronoq_jobs.status = 'cancelled' AND chronoq_jobs.worker_id IS NOT NULL
           AND o.outcome = 'cancelled'))
RETURNING chronoq_jobs.id

-- name: job_complete_many
-- The common batch, every attempt done with no output and nothing to record: job_finish_many's
-- effect for the outcome 'done', from [id, token] pairs instead of seven-field objects and with
-- no per-row CASE to evaluate. Fenced the same way; a cancelled job is left alone (a done
-- outcome never joins its history).
UPDATE chronoq_jobs NOT INDEXED
SET status = 'done', locked_until = NULL, finished_at = :now, output = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token
      FROM json_each(:refs)) AS o
WHERE chronoq_jobs.id = o.id AND chronoq_jobs.lease_token = o.token
  AND chronoq_jobs.status = 'running'
RETURNING chronoq_jobs.id

-- name: job_complete_in
UPDATE chronoq_jobs
SET status = 'done', locked_until = NULL, finished_at = :now, output = :output
WHERE id = :id AND lease_token = :token AND status = 'running'
RETURNING id

-- name: job_heartbeat_many
-- Renews running attempts and names, by status, those whose job was cancelled while they ran
-- (see the PostgreSQL query), with the progress each reported since its last heartbeat.
UPDATE chronoq_jobs NOT INDEXED
SET locked_until = CASE WHEN status = 'running'
                        THEN :now + CAST(lease_seconds * 1000000 AS INTEGER)
                        ELSE locked_until END,
    progress = CASE WHEN status = 'running' AND r.fraction IS NOT NULL
                    THEN r.fraction ELSE chronoq_jobs.progress END,
    progress_note = CASE WHEN status = 'running' AND r.fraction IS NOT NULL
                         THEN r.note ELSE chronoq_jobs.progress_note END
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token,
             json_extract(value, '$[2]') AS fraction, json_extract(value, '$[3]') AS note
      FROM json_each(:beats)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token = r.token
  AND (chronoq_jobs.status = 'running'
       OR (chronoq_jobs.status = 'cancelled' AND chronoq_jobs.worker_id IS NOT NULL))
RETURNING chronoq_jobs.id, chronoq_jobs.status

-- name: job_cancelled_among
-- Of the attempts named, those whose job was cancelled while they held it.
SELECT j.id
FROM chronoq_jobs AS j NOT INDEXED
JOIN (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
    ON j.id = r.id AND j.lease_token = r.token
WHERE j.status = 'cancelled' AND j.worker_id IS NOT NULL

-- name: job_fence_rejected
-- Writes refused because a newer claim moved the token on (see the PostgreSQL query).
UPDATE chronoq_jobs NOT INDEXED
SET fence_rejections = fence_rejections + 1
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token > r.token

-- name: job_release_many
UPDATE chronoq_jobs NOT INDEXED
SET status = 'pending', attempts = attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token = r.token
  AND chronoq_jobs.status = 'running'
RETURNING chronoq_jobs.id

-- name: job_hand_off_many
UPDATE chronoq_jobs NOT INDEXED
SET status = 'pending', attempts = attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL, run_at = max(run_at, :now + :delay)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token = r.token
  AND chronoq_jobs.status = 'running'
RETURNING chronoq_jobs.id

-- name: job_rescue_expired
UPDATE chronoq_jobs
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
    -- Keeps its run_at, its place in line (see the PostgreSQL query for why).
    run_at = CASE WHEN misfire = 'skip' THEN :now ELSE run_at END,
    finished_at = CASE WHEN attempts >= max_attempts THEN :now END,
    locked_until = NULL,
    worker_id = NULL,
    progress = NULL,
    progress_note = NULL,
    errors = json_insert(errors, '$[#]', json_object(
        'attempt', attempts,
        'error', 'LeaseExpired',
        'message', 'the lease expired before worker ' || coalesce(worker_id, '?')
                   || ' reported back (crashed, stalled or cut off)',
        'traceback', '',
        'worker', worker_id,
        'started_at', strftime('%Y-%m-%dT%H:%M:%S', started_at / 1000000, 'unixepoch')
                      || printf('.%06d+00:00', started_at % 1000000),
        'finished_at', strftime('%Y-%m-%dT%H:%M:%S', :now / 1000000, 'unixepoch')
                       || printf('.%06d+00:00', :now % 1000000),
        'outcome', CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retry' END))
WHERE id IN (
    -- INDEXED BY: the expired leases first, not every running job read and sorted.
    SELECT id FROM chronoq_jobs INDEXED BY chronoq_jobs_lease_idx
    WHERE status = 'running' AND locked_until < :now
    ORDER BY locked_until
    LIMIT :limit
)
RETURNING id, status

-- name: job_next_run_at
-- One index descent per queue (chronoq_jobs_next_due_idx), whatever the backlog.
SELECT min((SELECT run_at FROM chronoq_jobs INDEXED BY chronoq_jobs_next_due_idx
            WHERE status = 'pending' AND queue = q.value
            ORDER BY run_at LIMIT 1)) AS next_run_at
FROM json_each(:queues) AS q

-- name: job_next_run_after
-- After a claim: the next job to fall due later than the claim's clock, one index descent per
-- queue.
SELECT min((SELECT run_at FROM chronoq_jobs INDEXED BY chronoq_jobs_next_due_idx
            WHERE status = 'pending' AND queue = q.value AND run_at > :now
            ORDER BY run_at LIMIT 1)) AS next_run_at
FROM json_each(:queues) AS q

-- name: job_next_lease_expiry
SELECT min(locked_until) AS next_lease_expiry
FROM chronoq_jobs INDEXED BY chronoq_jobs_lease_idx
WHERE status = 'running'

-- name: job_get
SELECT * FROM chronoq_jobs WHERE id = :id

-- name: job_list
SELECT * FROM chronoq_jobs
WHERE (json_array_length(:statuses) = 0
       OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:worker IS NULL OR worker_id = :worker)
  AND (:key IS NULL OR key = :key)
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit

-- name: job_cancel
-- A running job keeps its worker, a pending one forgets it (see the PostgreSQL query).
UPDATE chronoq_jobs
SET status = 'cancelled', locked_until = NULL, finished_at = :now,
    worker_id = CASE WHEN status = 'running' THEN worker_id END
WHERE id = :id AND status IN ('pending', 'running')
RETURNING *

-- name: dead_ids
SELECT id FROM chronoq_jobs
WHERE status = 'dead'
  AND (:all OR id IN (SELECT value FROM json_each(:ids)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)

-- name: dead_requeue
-- Same rule as PostgreSQL: a dead job whose key a live job holds stays dead, and of several dead
-- jobs sharing a key only the newest is requeued. Keyless jobs group by id alone, so a key that
-- happens to spell another job's id never hides that job.
UPDATE chronoq_jobs
SET status = 'pending', attempts = 0, run_at = :now, locked_until = NULL, worker_id = NULL,
    started_at = NULL, finished_at = NULL
WHERE id IN (
    SELECT max(d.id) FROM chronoq_jobs AS d
    WHERE d.status = 'dead'
      AND (:all OR d.id IN (SELECT value FROM json_each(:ids)))
      AND (:queue IS NULL OR d.queue = :queue)
      AND (:task IS NULL OR d.task = :task)
      AND NOT EXISTS (
          SELECT 1 FROM chronoq_jobs AS l
          WHERE d.key IS NOT NULL AND l.key = d.key AND l.status IN ('pending', 'running'))
    GROUP BY d.key, CASE WHEN d.key IS NULL THEN d.id END
)
RETURNING id

-- name: job_ids_existing
-- Which of the ids given a job has, whatever its status (a requeue tells unknown ids apart).
SELECT id FROM chronoq_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: dead_purge
DELETE FROM chronoq_jobs
WHERE status = 'dead'
  AND finished_at <= :now - :older_than
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:all OR id IN (SELECT value FROM json_each(:ids)))

-- name: stats
SELECT queue, status, count(*) AS count
FROM chronoq_jobs
GROUP BY queue, status
ORDER BY queue, status

-- name: overview_queues
-- Per queue now (see the PostgreSQL query); times are microseconds.
WITH counts AS (
    SELECT queue,
           sum(status = 'pending') AS pending,
           sum(status = 'pending' AND run_at <= :now) AS due,
           sum(status = 'running') AS running,
           sum(status = 'dead') AS dead,
           min(CASE WHEN status = 'pending' AND run_at <= :now THEN run_at END) AS oldest_due
    FROM chronoq_jobs
    WHERE status IN ('pending', 'running', 'dead')
    GROUP BY queue
),
names AS (
    SELECT queue AS name FROM counts UNION SELECT name FROM chronoq_queues
)
SELECT names.name AS queue,
       coalesce(c.pending, 0) AS pending, coalesce(c.due, 0) AS due,
       coalesce(c.running, 0) AS running, coalesce(c.dead, 0) AS dead,
       coalesce((:now - c.oldest_due) / 1000000.0, 0.0) AS oldest_due_age
FROM names LEFT JOIN counts AS c ON c.queue = names.name
ORDER BY names.name

-- name: overview_finished
-- Per queue, status and bucket, and done jobs by lateness: the number of bounds at or below
-- it, as PostgreSQL's width_bucket counts.
SELECT queue, status, (finished_at / :bucket) * :bucket AS start,
       CASE WHEN status = 'done' AND started_at IS NOT NULL
            THEN (SELECT count(*) FROM json_each(:bounds)
                  WHERE value <= (started_at - run_at) / 1000000.0)
       END AS lateness_bucket,
       count(*) AS count
FROM chronoq_jobs
WHERE finished_at >= :since
GROUP BY 1, 2, 3, 4

-- name: job_prune
DELETE FROM chronoq_jobs
WHERE id IN (
    -- INDEXED BY: the oldest finished jobs first, not every one of them read and sorted.
    SELECT id FROM chronoq_jobs INDEXED BY chronoq_jobs_finished_idx
    WHERE status IN ('done', 'cancelled', 'skipped') AND finished_at < :now - :older_than
    ORDER BY finished_at
    LIMIT :limit
)

-- name: unique_keys_prune
-- A key's record goes once the longest period asked of it has passed.
DELETE FROM chronoq_unique_keys WHERE keep_until <= :now
