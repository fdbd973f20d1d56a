-- chronoq 0002: schedules, misfire policies, the skipped state, queue pause and rate limits,
-- and the table that records who leads.

-- Jobs learn their misfire policy, the rate key they are limited by, and, for jobs fired by a
-- schedule, which schedule and tick they stand for (`ticks` > 1 when missed ticks coalesced).
ALTER TABLE chronoq_jobs
    ADD COLUMN misfire       text             NOT NULL DEFAULT 'run_late',
    ADD COLUMN misfire_grace double precision,
    ADD COLUMN rate_key      text,
    ADD COLUMN schedule      text,
    ADD COLUMN tick          timestamptz,
    ADD COLUMN ticks         integer          NOT NULL DEFAULT 1;

ALTER TABLE chronoq_jobs DROP CONSTRAINT chronoq_jobs_status_check;
ALTER TABLE chronoq_jobs
    ADD CONSTRAINT chronoq_jobs_status_check
        CHECK (status IN ('pending', 'running', 'done', 'dead', 'cancelled', 'skipped')),
    ADD CONSTRAINT chronoq_jobs_misfire_check
        CHECK (misfire IN ('run_late', 'skip')
               AND (misfire <> 'skip' OR misfire_grace >= 0)),
    ADD CONSTRAINT chronoq_jobs_tick_check
        CHECK ((schedule IS NULL) = (tick IS NULL) AND ticks >= 1);

-- A tick is fired once, whatever the job's status: two schedulers in a split brain both insert
-- it and one insert finds the row already there.
CREATE UNIQUE INDEX chronoq_jobs_tick_idx ON chronoq_jobs (schedule, tick)
    WHERE schedule IS NOT NULL;

-- A queue's concurrency limit counts its running jobs.
CREATE INDEX chronoq_jobs_running_queue_idx ON chronoq_jobs (queue)
    WHERE status = 'running';

CREATE TABLE chronoq_schedules (
    name           text             PRIMARY KEY,
    cadence        text             NOT NULL,
    zone           text             NOT NULL DEFAULT 'UTC',
    task           text             NOT NULL,
    payload        jsonb            NOT NULL DEFAULT '{}'::jsonb,
    queue          text             NOT NULL,
    priority       integer          NOT NULL DEFAULT 0,
    misfire        text             NOT NULL DEFAULT 'coalesce',
    misfire_grace  double precision NOT NULL DEFAULT 60,
    catch_up       integer,
    jitter         double precision NOT NULL DEFAULT 0,
    paused         boolean          NOT NULL DEFAULT false,
    -- 'code': declared with App.schedule and synced when a scheduler starts; 'cli': added at
    -- run time. Syncing never touches a schedule of the other origin.
    origin         text             NOT NULL DEFAULT 'cli',
    -- The last tick handled; the next pass starts strictly after it. Set at creation, so a new
    -- schedule fires from its first tick after that moment.
    tick_cursor    timestamptz      NOT NULL DEFAULT clock_timestamp(),
    -- The first tick after the cursor, computed by the scheduler; NULL: compute it again.
    next_tick      timestamptz,
    fired          bigint           NOT NULL DEFAULT 0,
    late           bigint           NOT NULL DEFAULT 0,
    skipped        bigint           NOT NULL DEFAULT 0,
    coalesced      bigint           NOT NULL DEFAULT 0,
    lateness_total double precision NOT NULL DEFAULT 0,
    lateness_max   double precision NOT NULL DEFAULT 0,
    last_fired     timestamptz,
    created_at     timestamptz      NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz      NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT chronoq_schedules_misfire_check
        CHECK (misfire IN ('run_late', 'skip', 'coalesce', 'catch_up')
               AND misfire_grace >= 0
               AND (misfire = 'catch_up') = (catch_up IS NOT NULL)
               AND (catch_up IS NULL OR catch_up >= 1)),
    CONSTRAINT chronoq_schedules_jitter_check CHECK (jitter >= 0),
    CONSTRAINT chronoq_schedules_origin_check CHECK (origin IN ('code', 'cli'))
);

CREATE INDEX chronoq_schedules_due_idx ON chronoq_schedules (next_tick) WHERE NOT paused;

-- Queue settings. A queue without a row is unpaused and unlimited. `tokens` and `refilled_at`
-- are its token bucket: `rate` tokens a second up to `burst`, one spent per job claimed.
CREATE TABLE chronoq_queues (
    name        text             PRIMARY KEY,
    paused      boolean          NOT NULL DEFAULT false,
    rate        double precision,
    burst       double precision,
    concurrency integer,
    tokens      double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz,
    updated_at  timestamptz      NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT chronoq_queues_rate_check
        CHECK ((rate IS NULL) = (burst IS NULL) AND (rate IS NULL OR (rate > 0 AND burst >= 1))),
    CONSTRAINT chronoq_queues_concurrency_check CHECK (concurrency IS NULL OR concurrency >= 1)
);

-- A rate for each rate key of a queue matching `pattern` (a glob: * and ?), each key with a
-- bucket of its own in chronoq_key_buckets.
CREATE TABLE chronoq_key_limits (
    queue   text             NOT NULL,
    pattern text             NOT NULL,
    rate    double precision NOT NULL CHECK (rate > 0),
    burst   double precision NOT NULL CHECK (burst >= 1),
    PRIMARY KEY (queue, pattern)
);

CREATE TABLE chronoq_key_buckets (
    queue       text             NOT NULL,
    key         text             NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL,
    PRIMARY KEY (queue, key)
);

-- Who holds each leader-only duty, and since when. The lock itself is an advisory lock held by
-- the leader's session; this row is what operators and `chronoq scheduler --status` read.
CREATE TABLE chronoq_leaders (
    duty       text        PRIMARY KEY,
    holder     text        NOT NULL,
    term       bigint      NOT NULL,
    elected_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
