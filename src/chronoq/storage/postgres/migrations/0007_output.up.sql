-- chronoq 0007: what a job returns and how far a running attempt has come. `output` is the
-- handler's return value, stored by the fenced write that completes the job (a stale worker's
-- output is discarded with its completion). `progress` (0..1) and `progress_note` are the last
-- values an attempt reported, carried by its heartbeats; a retry clears them.
ALTER TABLE chronoq_jobs
    ADD COLUMN output        jsonb,
    ADD COLUMN progress      double precision,
    ADD COLUMN progress_note text,
    ADD CONSTRAINT chronoq_jobs_progress_check CHECK (progress BETWEEN 0 AND 1);

-- One notification per statement that leaves jobs in a final state, for `App.wait`: its waiters
-- look at their own jobs again. No payload: a statement can finish thousands of jobs, more ids
-- than a notification holds, and a waiter's look is one primary-key read.
CREATE FUNCTION chronoq_notify_finished_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM chronoq_changed_rows
               WHERE status IN ('done', 'dead', 'cancelled', 'skipped')) THEN
        PERFORM pg_notify('chronoq_jobs_finished', '');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER chronoq_jobs_notify_finished
    AFTER UPDATE ON chronoq_jobs
    REFERENCING NEW TABLE AS chronoq_changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chronoq_notify_finished_v1();
