-- chronoq 0009 down: the status index holds every job again.
DROP INDEX IF EXISTS chronoq_jobs_status_idx;
CREATE INDEX chronoq_jobs_status_idx ON chronoq_jobs (status, id);
