-- chronoq 0003: what operators look at. Each job counts the writes refused because they named
-- a stale lease token, and finished jobs are indexed by when they finished, for the dashboard's
-- recent throughput and lateness and for the pruner, which walks them oldest first.
ALTER TABLE chronoq_jobs ADD COLUMN fence_rejections integer NOT NULL DEFAULT 0;
CREATE INDEX chronoq_jobs_finished_idx ON chronoq_jobs (finished_at)
    WHERE finished_at IS NOT NULL;
