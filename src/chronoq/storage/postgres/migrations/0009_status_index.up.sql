-- chronoq 0009: the status index holds only the jobs that ended other than done (dead,
-- cancelled, skipped). Every job passes through pending, running and done, and each of those
-- transitions wrote an entry into the full index: one index insert in three a job costs, for
-- listings the other indexes already serve (pending jobs by the claim index or the primary key,
-- running ones by the lease index, done ones by the primary key or the finished index). Dead
-- letters and cancelled jobs, the rare ones a listing must find among millions, keep theirs.
DROP INDEX chronoq_jobs_status_idx;
CREATE INDEX chronoq_jobs_status_idx ON chronoq_jobs (status, id)
    WHERE status NOT IN ('pending', 'running', 'done');
