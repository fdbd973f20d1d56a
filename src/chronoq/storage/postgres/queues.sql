-- PostgreSQL: chronoq_queues, chronoq_key_limits and chronoq_key_buckets — pause and limits.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.

-- name: key_buckets_store
INSERT INTO chronoq_key_buckets (queue, key, tokens, refilled_at)
SELECT %(queue)s, b.key, b.tokens, b.refilled_at
FROM unnest(%(keys)s::text[], %(tokens)s::float8[], %(refilled_ats)s::timestamptz[])
    AS b(key, tokens, refilled_at)
ON CONFLICT (queue, key) DO UPDATE
SET tokens = excluded.tokens, refilled_at = excluded.refilled_at

-- name: queue_bucket_store
UPDATE chronoq_queues SET tokens = %(tokens)s, refilled_at = %(refilled_at)s WHERE name = %(queue)s

-- name: key_buckets_prune
-- A bucket that has refilled holds nothing a new bucket would not: drop it. Which of its
-- queue's limits a bucket serves is not stored, so it waits for the slowest one to refill.
DELETE FROM chronoq_key_buckets AS b
USING (SELECT queue, max(burst / rate) AS refill FROM chronoq_key_limits GROUP BY queue) AS k
WHERE b.queue = k.queue
  AND b.refilled_at < clock_timestamp() - k.refill * interval '1 second'

-- name: key_buckets_orphans_prune
DELETE FROM chronoq_key_buckets AS b
WHERE NOT EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = b.queue)

-- name: queue_list
-- Key limits in byte order, as on SQLite, whatever the cluster's collation.
SELECT c.name, c.paused, c.rate, c.burst, c.concurrency,
       coalesce((SELECT json_agg(json_build_object('pattern', k.pattern, 'rate', k.rate,
                                                   'burst', k.burst)
                          ORDER BY k.pattern COLLATE "C")
                 FROM chronoq_key_limits AS k WHERE k.queue = c.name), '[]'::json) AS key_limits
FROM chronoq_queues AS c
WHERE %(name)s::text IS NULL OR c.name = %(name)s::text
ORDER BY c.name COLLATE "C"

-- name: queue_pause
INSERT INTO chronoq_queues (name, paused) VALUES (%(name)s, %(paused)s)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = clock_timestamp()

-- name: queue_limit
-- A new or changed rate starts with a full bucket; storing the same rate again (every worker
-- does at start) keeps the bucket as it is, or a restart would grant an extra burst.
INSERT INTO chronoq_queues (name, rate, burst, concurrency)
VALUES (%(name)s, %(rate)s, %(burst)s, %(concurrency)s)
ON CONFLICT (name) DO UPDATE
SET rate = excluded.rate, burst = excluded.burst, concurrency = excluded.concurrency,
    tokens = CASE WHEN (chronoq_queues.rate, chronoq_queues.burst)
                       IS DISTINCT FROM (excluded.rate, excluded.burst)
                  THEN 0 ELSE chronoq_queues.tokens END,
    refilled_at = CASE WHEN (chronoq_queues.rate, chronoq_queues.burst)
                            IS DISTINCT FROM (excluded.rate, excluded.burst)
                       THEN NULL ELSE chronoq_queues.refilled_at END,
    updated_at = clock_timestamp()

-- name: queue_ensure
INSERT INTO chronoq_queues (name) VALUES (%(name)s) ON CONFLICT (name) DO NOTHING

-- name: key_limit_set
INSERT INTO chronoq_key_limits (queue, pattern, rate, burst)
VALUES (%(queue)s, %(pattern)s, %(rate)s, %(burst)s)
ON CONFLICT (queue, pattern) DO UPDATE SET rate = excluded.rate, burst = excluded.burst

-- name: key_limit_remove
DELETE FROM chronoq_key_limits WHERE queue = %(queue)s AND pattern = %(pattern)s

-- name: queue_names
-- Every queue with jobs (of any status) or stored settings, in byte order. The jobs' queues
-- are read by a loose index scan: one index probe per queue, however many jobs each holds.
WITH RECURSIVE used AS (
    (SELECT queue FROM chronoq_jobs ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM chronoq_jobs AS j WHERE j.queue > used.queue
            ORDER BY j.queue LIMIT 1)
    FROM used WHERE used.queue IS NOT NULL
)
SELECT name FROM (
    SELECT queue AS name FROM used WHERE queue IS NOT NULL
    UNION
    SELECT name FROM chronoq_queues
) AS known
ORDER BY name COLLATE "C"

-- name: queue_live_counts
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'running') AS running
FROM chronoq_jobs
WHERE queue = %(name)s AND status IN ('pending', 'running')

-- name: queue_remove
DELETE FROM chronoq_queues WHERE name = %(name)s

-- name: queue_key_limits_remove
DELETE FROM chronoq_key_limits WHERE queue = %(name)s

-- name: queue_key_buckets_remove
DELETE FROM chronoq_key_buckets WHERE queue = %(name)s
