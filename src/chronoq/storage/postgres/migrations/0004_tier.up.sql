-- chronoq 0004: tiered dispatch. The partition count is fixed the first time a database is used
-- in tiered mode, because a job's partition is its id modulo the count: changing it would move
-- jobs between partitions, and so between leaders, while their timers are staged. One row holds
-- it; the first tiered start inserts it, every later one reads it.
--
-- No index is added. The staging query reaches near-due jobs queue by queue through
-- chronoq_jobs_next_due_idx (queue, run_at), which also keeps it off the due backlog of paused
-- and limited queues; an index on run_at alone made every enqueue about a quarter slower and
-- still scanned such backlogs.
CREATE TABLE chronoq_tier (
    singleton  boolean     PRIMARY KEY DEFAULT true,
    partitions integer     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT chronoq_tier_one_row CHECK (singleton),
    CONSTRAINT chronoq_tier_partitions_check CHECK (partitions BETWEEN 1 AND 1024)
);
