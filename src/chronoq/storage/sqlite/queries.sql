-- Queries of the SQLite store. Times are integer microseconds since the epoch (UTC); :now is the
-- store's clock reading taken inside the write transaction (the host clock is the database clock
-- of an embedded database). Batches arrive as JSON arrays and are unpacked with json_each.

-- name: journal_mode_wal
-- WAL lets readers go on while one connection writes; the mode is stored in the file.
PRAGMA journal_mode = WAL

-- name: synchronous_normal
-- In WAL mode NORMAL loses no committed transaction on a process crash, only on power loss.
PRAGMA synchronous = NORMAL

-- name: migrations_table
CREATE TABLE IF NOT EXISTS chronoq_migrations (
    name       TEXT PRIMARY KEY,
    applied_at INTEGER NOT NULL
)

-- name: migrations_applied
SELECT name FROM chronoq_migrations ORDER BY name

-- name: migrations_record
INSERT INTO chronoq_migrations (name, applied_at) VALUES (:name, :now)

-- name: schema_check
SELECT count(*) AS present FROM sqlite_master WHERE type = 'table' AND name = 'chronoq_jobs'

-- name: job_insert
INSERT INTO chronoq_jobs (
    queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, created_at, misfire,
    misfire_grace, rate_key)
VALUES (
    :queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :key, :now,
    :misfire, :misfire_grace, :rate_key)
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
    misfire_grace, rate_key)
VALUES (
    :id, :queue, :task, :payload, :priority, :run_at, :max_attempts, :lease_seconds, :now,
    :misfire, :misfire_grace, :rate_key)

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

-- name: queue_requested
-- Which of the queues a worker asks for are paused, and which are limited (claimed from by
-- the limited path, under the same write transaction).
SELECT q.value AS name,
       coalesce(c.paused, 0) AS paused,
       (c.rate IS NOT NULL OR c.concurrency IS NOT NULL
        OR EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = q.value)) AS limited
FROM (SELECT DISTINCT value FROM json_each(:queues)) AS q
LEFT JOIN chronoq_queues AS c ON c.name = q.value

-- name: job_skip_expired
-- Due jobs with the misfire policy "skip" that are later than their grace end skipped before
-- the claim, so they take no place in its LIMIT.
UPDATE chronoq_jobs
SET status = 'skipped', finished_at = :now
WHERE id IN (
    SELECT id FROM chronoq_jobs
    WHERE status = 'pending'
      AND queue IN (SELECT value FROM json_each(:queues))
      AND run_at <= :now
    ORDER BY priority DESC, run_at, id
    LIMIT :limit
)
  AND misfire = 'skip' AND run_at + CAST(misfire_grace * 1000000 AS INTEGER) < :now

-- name: job_due_ids
-- Runs inside BEGIN IMMEDIATE: the write lock is taken before the read, so two processes can
-- never pick the same rows (SQLite's stand-in for FOR UPDATE SKIP LOCKED); job_claim_ids then
-- starts them.
SELECT id FROM chronoq_jobs
WHERE status = 'pending'
  AND queue IN (SELECT value FROM json_each(:queues))
  AND run_at <= :now
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

-- name: job_skip_ids
UPDATE chronoq_jobs SET status = 'skipped', finished_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'

-- name: job_defer_many
UPDATE chronoq_jobs
SET run_at = d.run_at
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS run_at
      FROM json_each(:deferrals)) AS d
WHERE chronoq_jobs.id = d.id AND chronoq_jobs.status = 'pending'

-- name: key_buckets_store
INSERT INTO chronoq_key_buckets (queue, key, tokens, refilled_at)
SELECT :queue, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
       json_extract(value, '$[2]')
FROM json_each(:buckets) WHERE true
ON CONFLICT (queue, key) DO UPDATE
SET tokens = excluded.tokens, refilled_at = excluded.refilled_at

-- name: queue_bucket_store
UPDATE chronoq_queues SET tokens = :tokens, refilled_at = :refilled_at WHERE name = :queue

-- name: job_finish_many
-- Fenced: a row whose token moved on or that is no longer running is left alone, and its id is
-- missing from the result. An error joins the history stamped by the store with the attempt it
-- belongs to and its start and end, as ISO 8601 UTC with microseconds (the form PostgreSQL writes).
UPDATE chronoq_jobs
SET status = CASE WHEN o.outcome = 'retry' THEN 'pending' ELSE o.outcome END,
    run_at = CASE WHEN o.outcome <> 'retry' OR (o.keep AND chronoq_jobs.misfire <> 'skip')
                  THEN chronoq_jobs.run_at
                  ELSE :now + CAST(o.delay * 1000000 AS INTEGER) END,
    locked_until = NULL,
    finished_at = CASE WHEN o.outcome = 'retry' THEN NULL ELSE :now END,
    errors = CASE WHEN o.error IS NULL THEN chronoq_jobs.errors
                  ELSE json_insert(chronoq_jobs.errors, '$[#]', json_set(json(o.error),
                      '$.attempt', chronoq_jobs.attempts,
                      '$.started_at',
                          strftime('%Y-%m-%dT%H:%M:%S', chronoq_jobs.started_at / 1000000, 'unixepoch')
                          || printf('.%06d+00:00', chronoq_jobs.started_at % 1000000),
                      '$.finished_at',
                          strftime('%Y-%m-%dT%H:%M:%S', :now / 1000000, 'unixepoch')
                          || printf('.%06d+00:00', :now % 1000000)))
             END
FROM (
    SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
           json_extract(value, '$.outcome') AS outcome, json_extract(value, '$.delay') AS delay,
           json_extract(value, '$.error') AS error, json_extract(value, '$.keep') AS keep
    FROM json_each(:items)
) AS o
WHERE chronoq_jobs.id = o.id AND chronoq_jobs.lease_token = o.token
  AND chronoq_jobs.status = 'running'
RETURNING chronoq_jobs.id

-- name: job_complete_in
UPDATE chronoq_jobs
SET status = 'done', locked_until = NULL, finished_at = :now
WHERE id = :id AND lease_token = :token AND status = 'running'
RETURNING id

-- name: job_heartbeat_many
UPDATE chronoq_jobs
SET locked_until = :now + CAST(lease_seconds * 1000000 AS INTEGER)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token = r.token
  AND chronoq_jobs.status = 'running'
RETURNING chronoq_jobs.id

-- name: job_fence_rejected
-- Writes refused because a newer claim moved the token on (see the PostgreSQL query).
UPDATE chronoq_jobs
SET fence_rejections = fence_rejections + 1
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:refs)) AS r
WHERE chronoq_jobs.id = r.id AND chronoq_jobs.lease_token > r.token

-- name: job_release_many
UPDATE chronoq_jobs
SET status = 'pending', attempts = attempts - 1, locked_until = NULL, worker_id = NULL,
    started_at = NULL
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
    SELECT id FROM chronoq_jobs
    WHERE status = 'running' AND locked_until < :now
    ORDER BY locked_until
    LIMIT :limit
)
RETURNING id, status

-- name: job_next_run_at
SELECT min(run_at) AS next_run_at FROM chronoq_jobs
WHERE status = 'pending' AND queue IN (SELECT value FROM json_each(:queues))

-- name: job_next_run_after
-- After a claim: the next job to fall due later than the claim's clock.
SELECT min(run_at) AS next_run_at FROM chronoq_jobs
WHERE status = 'pending' AND queue IN (SELECT value FROM json_each(:queues)) AND run_at > :now

-- name: job_next_lease_expiry
SELECT min(locked_until) AS next_lease_expiry FROM chronoq_jobs WHERE status = 'running'

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
UPDATE chronoq_jobs
SET status = 'cancelled', locked_until = NULL, finished_at = :now
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
    SELECT id FROM chronoq_jobs
    WHERE status IN ('done', 'cancelled', 'skipped') AND finished_at < :now - :older_than
    ORDER BY finished_at
    LIMIT :limit
)

-- name: key_buckets_prune
DELETE FROM chronoq_key_buckets
WHERE NOT EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = chronoq_key_buckets.queue)
   OR refilled_at < :now - (
        SELECT CAST(max(k.burst / k.rate) * 1000000 AS INTEGER) FROM chronoq_key_limits AS k
        WHERE k.queue = chronoq_key_buckets.queue)

-- name: queue_list
SELECT c.name, c.paused, c.rate, c.burst, c.concurrency,
       coalesce((SELECT json_group_array(json_object('pattern', k.pattern, 'rate', k.rate,
                                                     'burst', k.burst))
                 FROM (SELECT * FROM chronoq_key_limits WHERE queue = c.name ORDER BY pattern)
                     AS k), '[]') AS key_limits
FROM chronoq_queues AS c
WHERE :name IS NULL OR c.name = :name
ORDER BY c.name

-- name: queue_pause
INSERT INTO chronoq_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at

-- name: queue_limit
INSERT INTO chronoq_queues (name, rate, burst, concurrency, updated_at)
VALUES (:name, :rate, :burst, :concurrency, :now)
ON CONFLICT (name) DO UPDATE
SET rate = excluded.rate, burst = excluded.burst, concurrency = excluded.concurrency,
    -- Storing the same rate again (every worker does at start) keeps the bucket as it is.
    tokens = CASE WHEN chronoq_queues.rate IS NOT excluded.rate
                    OR chronoq_queues.burst IS NOT excluded.burst
                  THEN 0 ELSE chronoq_queues.tokens END,
    refilled_at = CASE WHEN chronoq_queues.rate IS NOT excluded.rate
                         OR chronoq_queues.burst IS NOT excluded.burst
                       THEN NULL ELSE chronoq_queues.refilled_at END,
    updated_at = excluded.updated_at

-- name: queue_ensure
INSERT INTO chronoq_queues (name, updated_at) VALUES (:name, :now) ON CONFLICT (name) DO NOTHING

-- name: key_limit_set
INSERT INTO chronoq_key_limits (queue, pattern, rate, burst)
VALUES (:queue, :pattern, :rate, :burst)
ON CONFLICT (queue, pattern) DO UPDATE SET rate = excluded.rate, burst = excluded.burst

-- name: key_limit_remove
DELETE FROM chronoq_key_limits WHERE queue = :queue AND pattern = :pattern

-- name: schedule_exists
SELECT 1 FROM chronoq_schedules WHERE name = :name

-- name: schedule_upsert
INSERT INTO chronoq_schedules (
    name, cadence, zone, task, payload, queue, priority, misfire, misfire_grace, catch_up,
    jitter, origin, tick_cursor, created_at, updated_at)
VALUES (
    :name, :cadence, :zone, :task, :payload, :queue, :priority, :misfire, :misfire_grace,
    :catch_up, :jitter, :origin, :now, :now, :now)
ON CONFLICT (name) DO UPDATE
SET cadence = excluded.cadence, zone = excluded.zone, task = excluded.task,
    payload = excluded.payload, queue = excluded.queue, priority = excluded.priority,
    misfire = excluded.misfire, misfire_grace = excluded.misfire_grace,
    catch_up = excluded.catch_up, jitter = excluded.jitter, origin = excluded.origin,
    next_tick = CASE WHEN chronoq_schedules.cadence IS NOT excluded.cadence
                       OR chronoq_schedules.zone IS NOT excluded.zone
                       OR chronoq_schedules.jitter IS NOT excluded.jitter
                     THEN NULL ELSE chronoq_schedules.next_tick END,
    updated_at = excluded.updated_at

-- name: schedule_get
SELECT * FROM chronoq_schedules WHERE name = :name

-- name: schedule_list
SELECT * FROM chronoq_schedules ORDER BY name

-- name: schedule_pause
UPDATE chronoq_schedules
SET tick_cursor = CASE WHEN paused AND NOT :paused THEN :now ELSE tick_cursor END,
    next_tick = CASE WHEN paused AND NOT :paused THEN NULL ELSE next_tick END,
    paused = :paused,
    updated_at = :now
WHERE name = :name
RETURNING *

-- name: schedule_cancel_ahead
UPDATE chronoq_jobs
SET status = 'cancelled', finished_at = :now
WHERE schedule = :name AND status = 'pending' AND (:all OR run_at > :now)

-- name: schedule_remove
DELETE FROM chronoq_schedules WHERE name = :name RETURNING name

-- name: schedule_due_names
SELECT name FROM chronoq_schedules
WHERE NOT paused AND (next_tick IS NULL OR next_tick <= :horizon)
ORDER BY name

-- name: schedule_next_tick
SELECT min(next_tick) AS next_tick FROM chronoq_schedules WHERE NOT paused

-- name: schedule_lock
SELECT * FROM chronoq_schedules WHERE name = :name AND NOT paused

-- name: schedule_record
UPDATE chronoq_schedules
SET tick_cursor = :cursor,
    next_tick = :next_tick,
    fired = fired + :fired,
    late = late + :late,
    skipped = skipped + :skipped,
    coalesced = coalesced + :coalesced,
    lateness_total = lateness_total + :lateness_total,
    lateness_max = max(lateness_max, :lateness_max),
    last_fired = CASE WHEN :fired > 0 THEN :now ELSE last_fired END
WHERE name = :name

-- name: leader_acquire
-- The lock row: taken when free or expired, renewed by its holder; a new holder starts the
-- next term. Nothing is returned when another holds an unexpired lock.
INSERT INTO chronoq_leaders (duty, holder, term, elected_at, renewed_at, expires_at)
VALUES (:duty, :holder, 1, :now, :now, :expires_at)
ON CONFLICT (duty) DO UPDATE
SET term = CASE WHEN chronoq_leaders.holder = excluded.holder
                THEN chronoq_leaders.term ELSE chronoq_leaders.term + 1 END,
    elected_at = CASE WHEN chronoq_leaders.holder = excluded.holder
                      THEN chronoq_leaders.elected_at ELSE excluded.elected_at END,
    holder = excluded.holder,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
WHERE chronoq_leaders.holder = excluded.holder OR chronoq_leaders.expires_at <= excluded.renewed_at
RETURNING *

-- name: leader_forget
-- The row stays, expired, so the next holder's term still counts up from it.
UPDATE chronoq_leaders SET expires_at = :now WHERE duty = :duty AND holder = :holder

-- name: leader_get
SELECT * FROM chronoq_leaders WHERE duty = :duty

-- name: data_version
PRAGMA data_version

-- name: begin_write
-- Takes the write lock before anything is read: two writers queue here instead of failing
-- with SQLITE_BUSY when a read lock would have to be upgraded.
BEGIN IMMEDIATE

-- name: commit
COMMIT

-- name: rollback
ROLLBACK
