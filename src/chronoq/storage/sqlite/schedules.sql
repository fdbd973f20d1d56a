-- SQLite: chronoq_schedules — definitions, cursors and their tick jobs.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Times are integer microseconds since the epoch (UTC); :now is the store's clock reading
-- taken inside the write transaction (the host clock is the database clock of an embedded
-- database). Batches arrive as JSON arrays and are unpacked with json_each.

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
SET status = 'cancelled', finished_at = :now, worker_id = NULL
WHERE schedule = :name AND status = 'pending' AND (:all OR run_at > :now)

-- name: schedule_remove
DELETE FROM chronoq_schedules WHERE name = :name RETURNING name

-- name: schedule_due
SELECT :now AS db_now,
       (SELECT json_group_array(name)
        FROM (SELECT name FROM chronoq_schedules
              WHERE NOT paused AND (next_tick IS NULL OR next_tick <= :now + :lookahead)
              ORDER BY name)) AS names,
       (SELECT min(next_tick) FROM chronoq_schedules WHERE NOT paused) AS next_tick

-- name: schedule_lock
-- The write transaction already serialises schedulers; :now is its clock reading.
SELECT *, :now AS db_now FROM chronoq_schedules WHERE name = :name AND NOT paused

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
