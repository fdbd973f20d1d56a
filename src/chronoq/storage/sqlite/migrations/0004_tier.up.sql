-- chronoq 0004 (SQLite): the partition count of tiered dispatch, fixed at its first use (see the
-- PostgreSQL migration for why). SQLite never runs tiered dispatch, but the store contract is one
-- for both adapters. Staging reads chronoq_jobs_next_due_idx: no index is added.
CREATE TABLE chronoq_tier (
    -- Not INTEGER PRIMARY KEY: that would make it the rowid, which ignores the default.
    singleton  BOOLEAN NOT NULL PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    partitions INTEGER NOT NULL CHECK (partitions BETWEEN 1 AND 1024),
    created_at INTEGER NOT NULL
);
