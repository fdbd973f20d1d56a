-- chronoq 0012 down: the finish notification goes out for every statement that leaves jobs final.
DROP TRIGGER IF EXISTS chronoq_jobs_notify_finished ON chronoq_jobs;
DROP FUNCTION IF EXISTS chronoq_notify_finished_v2();

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
