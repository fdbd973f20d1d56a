-- PostgreSQL: chronoq_schedules — definitions, cursors and their tick jobs.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.

-- name: schedule_upsert
-- The definition is replaced; the cursor, counters and pause stay. A changed cadence or zone
-- has its next tick computed again.
INSERT INTO chronoq_schedules (
    name, cadence, zone, task, payload, queue, priority, misfire, misfire_grace, catch_up,
    jitter, origin)
VALUES (
    %(name)s, %(cadence)s, %(zone)s, %(task)s, %(payload)s::jsonb, %(queue)s, %(priority)s,
    %(misfire)s, %(misfire_grace)s, %(catch_up)s, %(jitter)s, %(origin)s)
ON CONFLICT (name) DO UPDATE
SET cadence = excluded.cadence, zone = excluded.zone, task = excluded.task,
    payload = excluded.payload, queue = excluded.queue, priority = excluded.priority,
    misfire = excluded.misfire, misfire_grace = excluded.misfire_grace,
    catch_up = excluded.catch_up, jitter = excluded.jitter, origin = excluded.origin,
    next_tick = CASE WHEN (chronoq_schedules.cadence, chronoq_schedules.zone,
                           chronoq_schedules.jitter)
                          IS DISTINCT FROM (excluded.cadence, excluded.zone, excluded.jitter)
                     THEN NULL ELSE chronoq_schedules.next_tick END,
    updated_at = clock_timestamp()
RETURNING (xmax = 0) AS created

-- name: schedule_get
SELECT * FROM chronoq_schedules WHERE name = %(name)s

-- name: schedule_list
SELECT * FROM chronoq_schedules ORDER BY name COLLATE "C"

-- name: schedule_pause
UPDATE chronoq_schedules
SET paused = %(paused)s,
    -- Ticks that fell in the pause are not missed ticks: resuming starts from now.
    tick_cursor = CASE WHEN paused AND NOT %(paused)s THEN clock_timestamp() ELSE tick_cursor END,
    next_tick = CASE WHEN paused AND NOT %(paused)s THEN NULL ELSE next_tick END,
    updated_at = clock_timestamp()
WHERE name = %(name)s
RETURNING *

-- name: schedule_cancel_ahead
-- Tick jobs fired ahead of their time for a schedule paused or removed are cancelled, and forget
-- their last worker (see job_cancel).
UPDATE chronoq_jobs
SET status = 'cancelled', finished_at = clock_timestamp(), worker_id = NULL
WHERE schedule = %(name)s AND status = 'pending'
  AND (%(all)s OR run_at > clock_timestamp())

-- name: schedule_remove
DELETE FROM chronoq_schedules WHERE name = %(name)s RETURNING name

-- name: schedule_due
SELECT clock_timestamp() AS db_now,
       -- Byte order, as on SQLite, whatever the cluster's collation.
       (SELECT coalesce(array_agg(name ORDER BY name COLLATE "C"), '{}') FROM chronoq_schedules
        WHERE NOT paused
          AND (next_tick IS NULL
               OR next_tick <= clock_timestamp() + %(lookahead)s * interval '1 second'))
           AS names,
       (SELECT min(next_tick) FROM chronoq_schedules WHERE NOT paused) AS next_tick

-- name: schedule_lock
-- Two schedulers (a split brain) handling one schedule take turns here, and the second sees
-- the cursor the first moved.
SELECT *, clock_timestamp() AS db_now FROM chronoq_schedules
WHERE name = %(name)s AND NOT paused
FOR UPDATE

-- name: schedule_record
UPDATE chronoq_schedules
SET tick_cursor = %(cursor)s,
    next_tick = %(next_tick)s,
    fired = fired + %(fired)s,
    late = late + %(late)s,
    skipped = skipped + %(skipped)s,
    coalesced = coalesced + %(coalesced)s,
    lateness_total = lateness_total + %(lateness_total)s,
    lateness_max = greatest(lateness_max, %(lateness_max)s),
    last_fired = CASE WHEN %(fired)s > 0 THEN clock_timestamp() ELSE last_fired END
WHERE name = %(name)s
