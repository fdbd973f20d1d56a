-- chronoq 0011 down: jobs forget who waits for them, and every update statement is looked at for
-- jobs it left pending again.
DROP TRIGGER IF EXISTS chronoq_jobs_notify_update ON chronoq_jobs;
DROP FUNCTION IF EXISTS chronoq_notify_pending_v1();
CREATE TRIGGER chronoq_jobs_notify_update
    AFTER UPDATE ON chronoq_jobs
    REFERENCING NEW TABLE AS chronoq_changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chronoq_notify_jobs_v1();
ALTER TABLE chronoq_jobs DROP COLUMN IF EXISTS finish_watched;
