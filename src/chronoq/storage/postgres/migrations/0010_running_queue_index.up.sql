-- chronoq 0010: the running-queue index serves only the statements that count a queue's running
-- jobs. It had the lease index's predicate (status = 'running'), so the statements looking for
-- the earliest lease (every claim's wake-up time, job_next_wakeup, the rescuer) could be planned
-- on it too, and when the last ANALYZE saw few running jobs (as after a quiet spell) the planner
-- priced a walk of every running job's entry in it the same as one descent of
-- chronoq_jobs_lease_idx, and took the walk: each claim then read every running job, and the
-- entries of the jobs finished since the last vacuum. `queue IS NOT NULL` (always true, the
-- column is NOT NULL) is implied by `queue = ...`, which the counting statements have and the
-- lease statements do not.
DROP INDEX chronoq_jobs_running_queue_idx;
CREATE INDEX chronoq_jobs_running_queue_idx ON chronoq_jobs (queue)
    WHERE status = 'running' AND queue IS NOT NULL;
