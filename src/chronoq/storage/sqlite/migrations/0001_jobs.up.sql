-- chronoq 0001 (SQLite): the jobs table and its indexes. Times are integer microseconds since
-- the Unix epoch, UTC; JSON columns hold text checked by json_valid.

CREATE TABLE chronoq_jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    queue         TEXT    NOT NULL,
    task          TEXT    NOT NULL,
    payload       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'done', 'dead', 'cancelled')),
    priority      INTEGER NOT NULL DEFAULT 0,
    run_at        INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- NULL: the task's own setting, which the worker that claims the job fills in.
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

CREATE INDEX chronoq_jobs_claim_idx ON chronoq_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_next_due_idx ON chronoq_jobs (queue, run_at)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_lease_idx ON chronoq_jobs (locked_until)
    WHERE status = 'running';
CREATE UNIQUE INDEX chronoq_jobs_live_key_idx ON chronoq_jobs (key)
    WHERE key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX chronoq_jobs_status_idx ON chronoq_jobs (status, id);
