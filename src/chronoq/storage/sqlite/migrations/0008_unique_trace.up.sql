-- chronoq 0008 (SQLite): keys unique for a period, and the trace context a job was enqueued in
-- (see the PostgreSQL migration). Times are microseconds since the epoch; the trace context is
-- JSON text.
ALTER TABLE chronoq_jobs ADD COLUMN trace_context TEXT
    CHECK (trace_context IS NULL OR json_valid(trace_context));

-- The job that took each key with `unique_for`, and when; no foreign key, as the record
-- outlives the pruning of its job. `keep_until`: when the pruner may drop it.
CREATE TABLE chronoq_unique_keys (
    key         TEXT    NOT NULL PRIMARY KEY,
    job_id      INTEGER NOT NULL,
    enqueued_at INTEGER NOT NULL,
    keep_until  INTEGER NOT NULL
);

CREATE INDEX chronoq_unique_keys_keep_idx ON chronoq_unique_keys (keep_until);
