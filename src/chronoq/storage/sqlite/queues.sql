-- SQLite: chronoq_queues, chronoq_key_limits and chronoq_key_buckets — pause and limits.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Times are integer microseconds since the epoch (UTC); :now is the store's clock reading
-- taken inside the write transaction (the host clock is the database clock of an embedded
-- database). Batches arrive as JSON arrays and are unpacked with json_each.

-- name: queue_requested
-- Which of the queues a worker asks for are paused, and which are limited (claimed from by
-- the limited path, under the same write transaction).
SELECT q.value AS name,
       coalesce(c.paused, 0) AS paused,
       (c.rate IS NOT NULL OR c.concurrency IS NOT NULL
        OR EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = q.value)) AS limited
FROM (SELECT DISTINCT value FROM json_each(:queues)) AS q
LEFT JOIN chronoq_queues AS c ON c.name = q.value

-- name: key_buckets_store
INSERT INTO chronoq_key_buckets (queue, key, tokens, refilled_at)
SELECT :queue, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
       json_extract(value, '$[2]')
FROM json_each(:buckets) WHERE true
ON CONFLICT (queue, key) DO UPDATE
SET tokens = excluded.tokens, refilled_at = excluded.refilled_at

-- name: queue_bucket_store
UPDATE chronoq_queues SET tokens = :tokens, refilled_at = :refilled_at WHERE name = :queue

-- name: key_buckets_prune
-- A bucket that has refilled holds nothing a new bucket would not: drop it. Which of its
-- queue's limits a bucket serves is not stored, so it waits for the slowest one to refill.
DELETE FROM chronoq_key_buckets
WHERE refilled_at < :now - (
        SELECT CAST(max(k.burst / k.rate) * 1000000 AS INTEGER) FROM chronoq_key_limits AS k
        WHERE k.queue = chronoq_key_buckets.queue)

-- name: key_buckets_orphans_prune
DELETE FROM chronoq_key_buckets
WHERE NOT EXISTS (SELECT 1 FROM chronoq_key_limits AS k WHERE k.queue = chronoq_key_buckets.queue)

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

-- name: queue_names
-- Every queue with jobs (of any status) or stored settings, in byte order.
SELECT DISTINCT queue AS name FROM chronoq_jobs
UNION
SELECT name FROM chronoq_queues
ORDER BY name

-- name: queue_live_counts
SELECT coalesce(sum(status = 'pending'), 0) AS pending,
       coalesce(sum(status = 'running'), 0) AS running
FROM chronoq_jobs
WHERE queue = :name AND status IN ('pending', 'running')

-- name: queue_remove
DELETE FROM chronoq_queues WHERE name = :name

-- name: queue_key_limits_remove
DELETE FROM chronoq_key_limits WHERE queue = :name

-- name: queue_key_buckets_remove
DELETE FROM chronoq_key_buckets WHERE queue = :name
