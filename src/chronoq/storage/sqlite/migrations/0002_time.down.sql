-- chronoq 0002 down (SQLite): drops schedules, queue settings and limits and the leader row, and
-- rebuilds the jobs table without the new columns. Skipped jobs become cancelled.
DROP TABLE IF EXISTS chronoq_leaders;
DROP TABLE IF EXISTS chronoq_key_buckets;
DROP TABLE IF EXISTS chronoq_key_limits;
DROP TABLE IF EXISTS chronoq_queues;
DROP TABLE IF EXISTS chronoq_schedules;

CREATE TABLE chronoq_jobs_v1 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    queue         TEXT    NOT NULL,
    task          TEXT    NOT NULL,
    payload       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'done', 'dead', 'cancelled')),
    priority      INTEGER NOT NULL DEFAULT 0,
    run_at        INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts  INTEGER CHECK (max_attempts IS NULL OR max_attempts >= 1),
    lease_seconds REAL    NOT NULL DEFAULT 60 CHECK (lease_seconds > 0),
    lease_token   INTEGER NOT NULL DEFAULT 0,
    locked_until  INTEGER,
    worker_id     TEXT,
    key           TEXT,
    errors        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(errors)),
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    CHECK (status <> 'running' OR locked_until IS NOT NULL)
);

INSERT INTO chronoq_jobs_v1 (
    id, queue, task, payload, status, priority, run_at, attempts, max_attempts, lease_seconds,
    lease_token, locked_until, worker_id, key, errors, created_at, started_at, finished_at)
SELECT id, queue, task, payload,
       CASE WHEN status = 'skipped' THEN 'cancelled' ELSE status END,
       priority, run_at, attempts, max_attempts, lease_seconds, lease_token, locked_until,
       worker_id, key, errors, created_at, started_at, finished_at
FROM chronoq_jobs;

DELETE FROM sqlite_sequence WHERE name = 'chronoq_jobs_v1';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'chronoq_jobs_v1', seq FROM sqlite_sequence WHERE name = 'chronoq_jobs';

DROP TABLE chronoq_jobs;
ALTER TABLE chronoq_jobs_v1 RENAME TO chronoq_jobs;

CREATE INDEX chronoq_jobs_claim_idx ON chronoq_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_next_due_idx ON chronoq_jobs (queue, run_at)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_lease_idx ON chronoq_jobs (locked_until)
    WHERE status = 'running';
CREATE UNIQUE INDEX chronoq_jobs_live_key_idx ON chronoq_jobs (key)
    WHERE key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX chronoq_jobs_status_idx ON chronoq_jobs (status, id);
