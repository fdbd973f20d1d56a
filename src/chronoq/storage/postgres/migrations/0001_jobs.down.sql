-- chronoq 0001 down: drops the jobs table and everything in it.
DROP TRIGGER IF EXISTS chronoq_jobs_notify_update ON chronoq_jobs;
DROP TRIGGER IF EXISTS chronoq_jobs_notify_insert ON chronoq_jobs;
DROP FUNCTION IF EXISTS chronoq_notify_jobs_v1();
DROP TABLE IF EXISTS chronoq_jobs;
