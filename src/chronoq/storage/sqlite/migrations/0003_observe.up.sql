-- chronoq 0003 (SQLite): the count of writes refused for a stale lease token, and finished
-- jobs indexed by when they finished (the dashboard's recent figures, the pruner).
ALTER TABLE chronoq_jobs ADD COLUMN fence_rejections INTEGER NOT NULL DEFAULT 0;
CREATE INDEX chronoq_jobs_finished_idx ON chronoq_jobs (finished_at)
    WHERE finished_at IS NOT NULL;
