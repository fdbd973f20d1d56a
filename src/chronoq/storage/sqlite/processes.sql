-- SQLite: chronoq_processes — the fleet registry (see the PostgreSQL file). Times are
-- microseconds since the epoch; :now is the store's clock reading or a test's pinned instant.

-- name: process_beat
INSERT INTO chronoq_processes
    (id, kind, host, pid, version, queues, concurrency, tasks, duties, running,
     started_at, seen_at, expires_at, stopped_at)
VALUES (:id, :kind, :host, :pid, :version, :queues, :concurrency, :tasks, :duties, :running,
        :now, :now, :now + :ttl, NULL)
ON CONFLICT (id) DO UPDATE
SET kind = excluded.kind, host = excluded.host, pid = excluded.pid, version = excluded.version,
    queues = excluded.queues, concurrency = excluded.concurrency, tasks = excluded.tasks,
    duties = excluded.duties, running = excluded.running, seen_at = excluded.seen_at,
    expires_at = excluded.expires_at, stopped_at = NULL

-- name: process_stop
UPDATE chronoq_processes SET stopped_at = :now, running = 0, duties = '[]'
WHERE id = :id AND stopped_at IS NULL

-- name: process_list
SELECT p.id, p.kind, p.host, p.pid, p.version, p.queues, p.concurrency, p.tasks, p.duties,
       p.running, p.started_at, p.seen_at, p.expires_at, p.stopped_at,
       (p.stopped_at IS NULL AND p.expires_at > c.now) AS alive, c.now AS db_now
FROM (SELECT :now AS now) AS c LEFT JOIN chronoq_processes AS p
    ON (:all OR (p.stopped_at IS NULL AND p.expires_at > c.now))
   AND min(coalesce(p.stopped_at, p.expires_at), p.expires_at) > c.now - :recent
ORDER BY p.seen_at DESC NULLS LAST, p.id

-- name: process_prune
DELETE FROM chronoq_processes
WHERE min(coalesce(stopped_at, expires_at), expires_at) < :now - :recent
