-- chronoq 0002 down: drops schedules, queue settings and limits, and the columns jobs gained.
-- Skipped jobs become cancelled: the older schema has no skipped state.
DROP TABLE IF EXISTS chronoq_leaders;
DROP TABLE IF EXISTS chronoq_key_buckets;
DROP TABLE IF EXISTS chronoq_key_limits;
DROP TABLE IF EXISTS chronoq_queues;
DROP TABLE IF EXISTS chronoq_schedules;
DROP INDEX IF EXISTS chronoq_jobs_running_queue_idx;
DROP INDEX IF EXISTS chronoq_jobs_tick_idx;
ALTER TABLE chronoq_jobs DROP CONSTRAINT chronoq_jobs_tick_check;
ALTER TABLE chronoq_jobs DROP CONSTRAINT chronoq_jobs_misfire_check;
ALTER TABLE chronoq_jobs DROP CONSTRAINT chronoq_jobs_status_check;
UPDATE chronoq_jobs SET status = 'cancelled' WHERE status = 'skipped';
ALTER TABLE chronoq_jobs
    ADD CONSTRAINT chronoq_jobs_status_check
        CHECK (status IN ('pending', 'running', 'done', 'dead', 'cancelled'));
ALTER TABLE chronoq_jobs
    DROP COLUMN ticks,
    DROP COLUMN tick,
    DROP COLUMN schedule,
    DROP COLUMN rate_key,
    DROP COLUMN misfire_grace,
    DROP COLUMN misfire;
