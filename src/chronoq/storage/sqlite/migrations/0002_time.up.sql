-- chronoq 0002 (SQLite): schedules, misfire policies, the skipped state, queue pause and rate
-- limits, and the leader lock row. SQLite cannot change a CHECK constraint in place, so the jobs
-- table is rebuilt with its new columns, keeping every id and the AUTOINCREMENT counter.

CREATE TABLE chronoq_jobs_v2 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    queue         TEXT    NOT NULL,
    task          TEXT    NOT NULL,
    payload       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'done', 'dead', 'cancelled', 'skipped')),
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
    misfire       TEXT    NOT NULL DEFAULT 'run_late',
    misfire_grace REAL,
    rate_key      TEXT,
    schedule      TEXT,
    tick          INTEGER,
    ticks         INTEGER NOT NULL DEFAULT 1,
    CHECK (status <> 'running' OR locked_until IS NOT NULL),
    CHECK (misfire IN ('run_late', 'skip') AND (misfire <> 'skip' OR misfire_grace >= 0)),
    CHECK ((schedule IS NULL) = (tick IS NULL) AND ticks >= 1)
);

INSERT INTO chronoq_jobs_v2 (
    id, queue, task, payload, status, priority, run_at, attempts, max_attempts, lease_seconds,
    lease_token, locked_until, worker_id, key, errors, created_at, started_at, finished_at)
SELECT id, queue, task, payload, status, priority, run_at, attempts, max_attempts, lease_seconds,
       lease_token, locked_until, worker_id, key, errors, created_at, started_at, finished_at
FROM chronoq_jobs;

-- Ids of deleted jobs are never handed out again: carry the counter over.
DELETE FROM sqlite_sequence WHERE name = 'chronoq_jobs_v2';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'chronoq_jobs_v2', seq FROM sqlite_sequence WHERE name = 'chronoq_jobs';

DROP TABLE chronoq_jobs;
ALTER TABLE chronoq_jobs_v2 RENAME TO chronoq_jobs;

CREATE INDEX chronoq_jobs_claim_idx ON chronoq_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_next_due_idx ON chronoq_jobs (queue, run_at)
    WHERE status = 'pending';
CREATE INDEX chronoq_jobs_lease_idx ON chronoq_jobs (locked_until)
    WHERE status = 'running';
CREATE UNIQUE INDEX chronoq_jobs_live_key_idx ON chronoq_jobs (key)
    WHERE key IS NOT NULL AND status IN ('pending', 'running');
CREATE INDEX chronoq_jobs_status_idx ON chronoq_jobs (status, id);
CREATE UNIQUE INDEX chronoq_jobs_tick_idx ON chronoq_jobs (schedule, tick)
    WHERE schedule IS NOT NULL;
CREATE INDEX chronoq_jobs_running_queue_idx ON chronoq_jobs (queue)
    WHERE status = 'running';

CREATE TABLE chronoq_schedules (
    name           TEXT    PRIMARY KEY,
    cadence        TEXT    NOT NULL,
    zone           TEXT    NOT NULL DEFAULT 'UTC',
    task           TEXT    NOT NULL,
    payload        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue          TEXT    NOT NULL,
    priority       INTEGER NOT NULL DEFAULT 0,
    misfire        TEXT    NOT NULL DEFAULT 'coalesce',
    misfire_grace  REAL    NOT NULL DEFAULT 60,
    catch_up       INTEGER,
    jitter         REAL    NOT NULL DEFAULT 0 CHECK (jitter >= 0),
    paused         INTEGER NOT NULL DEFAULT 0,
    origin         TEXT    NOT NULL DEFAULT 'cli' CHECK (origin IN ('code', 'cli')),
    tick_cursor    INTEGER NOT NULL,
    next_tick      INTEGER,
    fired          INTEGER NOT NULL DEFAULT 0,
    late           INTEGER NOT NULL DEFAULT 0,
    skipped        INTEGER NOT NULL DEFAULT 0,
    coalesced      INTEGER NOT NULL DEFAULT 0,
    lateness_total REAL    NOT NULL DEFAULT 0,
    lateness_max   REAL    NOT NULL DEFAULT 0,
    last_fired     INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    CHECK (misfire IN ('run_late', 'skip', 'coalesce', 'catch_up')
           AND misfire_grace >= 0
           AND (misfire = 'catch_up') = (catch_up IS NOT NULL)
           AND (catch_up IS NULL OR catch_up >= 1))
);

CREATE INDEX chronoq_schedules_due_idx ON chronoq_schedules (next_tick) WHERE NOT paused;

CREATE TABLE chronoq_queues (
    name        TEXT    PRIMARY KEY,
    paused      INTEGER NOT NULL DEFAULT 0,
    rate        REAL,
    burst       REAL,
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    tokens      REAL    NOT NULL DEFAULT 0,
    refilled_at INTEGER,
    updated_at  INTEGER NOT NULL,
    CHECK ((rate IS NULL) = (burst IS NULL) AND (rate IS NULL OR (rate > 0 AND burst >= 1)))
);

CREATE TABLE chronoq_key_limits (
    queue   TEXT NOT NULL,
    pattern TEXT NOT NULL,
    rate    REAL NOT NULL CHECK (rate > 0),
    burst   REAL NOT NULL CHECK (burst >= 1),
    PRIMARY KEY (queue, pattern)
);

CREATE TABLE chronoq_key_buckets (
    queue       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    tokens      REAL    NOT NULL,
    refilled_at INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
);

CREATE TABLE chronoq_leaders (
    duty       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    term       INTEGER NOT NULL,
    elected_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
