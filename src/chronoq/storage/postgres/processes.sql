-- PostgreSQL: chronoq_processes — the fleet registry.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Liveness is decided on the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it.

-- name: process_beat
-- Insert or refresh a process's record. A process that was marked stopped or had expired and
-- beats again (a long pause, a network partition that healed) is alive again.
INSERT INTO chronoq_processes AS p
    (id, kind, host, pid, version, queues, concurrency, tasks, duties, running,
     started_at, seen_at, expires_at, stopped_at)
SELECT %(id)s, %(kind)s, %(host)s, %(pid)s, %(version)s, %(queues)s::jsonb, %(concurrency)s,
       %(tasks)s::jsonb, %(duties)s::jsonb, %(running)s, c.now, c.now,
       c.now + %(ttl)s * interval '1 second', NULL
FROM (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now) AS c
ON CONFLICT (id) DO UPDATE
SET kind = excluded.kind, host = excluded.host, pid = excluded.pid, version = excluded.version,
    queues = excluded.queues, concurrency = excluded.concurrency, tasks = excluded.tasks,
    duties = excluded.duties, running = excluded.running, seen_at = excluded.seen_at,
    expires_at = excluded.expires_at, stopped_at = NULL

-- name: process_stop
UPDATE chronoq_processes
SET stopped_at = coalesce(%(now)s::timestamptz, clock_timestamp()), running = 0,
    duties = '[]'::jsonb
WHERE id = %(id)s AND stopped_at IS NULL

-- name: process_list
-- Most recently seen first. Records older than `recent` seconds past their end are left out
-- (and pruned by process_prune).
WITH c AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
SELECT p.id, p.kind, p.host, p.pid, p.version, p.queues, p.concurrency, p.tasks, p.duties,
       p.running, p.started_at, p.seen_at, p.expires_at, p.stopped_at,
       (p.stopped_at IS NULL AND p.expires_at > c.now) AS alive, c.now AS db_now
FROM c LEFT JOIN chronoq_processes AS p
    ON (%(all)s OR (p.stopped_at IS NULL AND p.expires_at > c.now))
   AND least(coalesce(p.stopped_at, p.expires_at), p.expires_at)
       > c.now - %(recent)s * interval '1 second'
ORDER BY p.seen_at DESC NULLS LAST, p.id

-- name: process_prune
DELETE FROM chronoq_processes
WHERE least(coalesce(stopped_at, expires_at), expires_at)
      < coalesce(%(now)s::timestamptz, clock_timestamp()) - %(recent)s * interval '1 second'
