-- chronoq 0012: the finish notification goes out only for a job someone waits for. PostgreSQL
-- wakes every connection that has run LISTEN in the database at each NOTIFY, whatever its
-- channel (each worker process keeps one), and the woken backend runs a transaction to read the
-- queue: about 24 µs of server CPU a listener for each finish statement, when every statement
-- that left jobs final notified. A row trigger whose WHEN is false costs no call: the finish of a
-- job nobody waits for sends nothing. A statement ending several watched jobs sends one
-- notification (PostgreSQL folds identical ones within a transaction).
--
-- A waiter of a release before 0011 does not mark its job, and is woken only when a marked job
-- ends: apply this once no such process waits for jobs.
DROP TRIGGER chronoq_jobs_notify_finished ON chronoq_jobs;
DROP FUNCTION chronoq_notify_finished_v1();

CREATE FUNCTION chronoq_notify_finished_v2() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chronoq_jobs_finished', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER chronoq_jobs_notify_finished
    AFTER UPDATE ON chronoq_jobs
    FOR EACH ROW
    WHEN (NEW.finish_watched AND NEW.status IN ('done', 'dead', 'cancelled', 'skipped')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION chronoq_notify_finished_v2();
