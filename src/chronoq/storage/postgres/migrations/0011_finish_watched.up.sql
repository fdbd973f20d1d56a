-- chronoq 0011: a job remembers that someone waits for it to end (`App.wait` marks it before its
-- first look). Nothing reads the mark yet: the finish notification still goes out for every
-- statement that leaves jobs final, so processes of older releases, which wait without marking,
-- keep being woken. 0012 sends it for marked jobs only; apply it once no process of a release
-- before 0011 waits for jobs (see docs/guides/rolling-deploys.md).
ALTER TABLE chronoq_jobs ADD COLUMN finish_watched boolean NOT NULL DEFAULT false;

-- An update wakes the workers when it makes a job pending (a retry, a rescue, a release, a
-- hand-off, a requeue) or moves a pending job's run_at or queue; a row trigger whose WHEN says
-- so, instead of a statement trigger that looked at every updated row. A waiter's mark leaves
-- status, run_at and queue as they were, and wakes no one; claims and finishes call nothing
-- and, once 0012 makes the finish trigger a row trigger too, keep no transition table of the
-- rows they update. The payload names the queue alone (workers claim on any notification), so
-- that a statement making many jobs of a queue pending sends one notification (PostgreSQL
-- folds identical ones within a transaction).
DROP TRIGGER chronoq_jobs_notify_update ON chronoq_jobs;

CREATE FUNCTION chronoq_notify_pending_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chronoq_jobs', json_build_object('queue', NEW.queue)::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER chronoq_jobs_notify_update
    AFTER UPDATE ON chronoq_jobs
    FOR EACH ROW
    WHEN (NEW.status = 'pending'
          AND (OLD.status <> 'pending' OR OLD.run_at IS DISTINCT FROM NEW.run_at
               OR OLD.queue <> NEW.queue))
    EXECUTE FUNCTION chronoq_notify_pending_v1();
