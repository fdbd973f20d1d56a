-- chronoq 0010 down: the running-queue index on every running job again.
DROP INDEX IF EXISTS chronoq_jobs_running_queue_idx;
CREATE INDEX chronoq_jobs_running_queue_idx ON chronoq_jobs (queue)
    WHERE status = 'running';
