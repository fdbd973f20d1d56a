-- chronoq 0003 down: drops the finished-at index and the count of refused writes.
DROP INDEX IF EXISTS chronoq_jobs_finished_idx;
ALTER TABLE chronoq_jobs DROP COLUMN IF EXISTS fence_rejections;
