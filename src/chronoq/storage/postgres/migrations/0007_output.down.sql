-- chronoq 0007 down: forgets job output, progress and the finish notification.
DROP TRIGGER IF EXISTS chronoq_jobs_notify_finished ON chronoq_jobs;
DROP FUNCTION IF EXISTS chronoq_notify_finished_v1();
ALTER TABLE chronoq_jobs
    DROP CONSTRAINT IF EXISTS chronoq_jobs_progress_check,
    DROP COLUMN IF EXISTS output,
    DROP COLUMN IF EXISTS progress,
    DROP COLUMN IF EXISTS progress_note;
