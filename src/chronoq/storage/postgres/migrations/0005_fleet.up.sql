-- chronoq 0005: the fleet registry. Every worker, scheduler and server records itself here and
-- refreshes its row while it runs; a row past `expires_at` belongs to a process that stopped
-- refreshing (killed, frozen, cut off), one with `stopped_at` to a process that stopped cleanly.
-- Rows stay a day after that, so a producer without the handlers' code can still learn a task's
-- queue and settings across a restart of every worker. `tasks` holds one object per task the
-- process knows: name, queue, priority, max_attempts, lease, timeout, misfire, misfire_grace and
-- the handler's payload parameters.
CREATE TABLE chronoq_processes (
    id          text        PRIMARY KEY,
    kind        text        NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    version     text        NOT NULL,
    queues      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    concurrency integer,
    tasks       jsonb       NOT NULL DEFAULT '[]'::jsonb,
    duties      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    running     integer     NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    stopped_at  timestamptz,
    CONSTRAINT chronoq_processes_kind_check CHECK (kind IN ('worker', 'scheduler', 'server')),
    CONSTRAINT chronoq_processes_running_check CHECK (running >= 0)
);
