-- chronoq 0007 (SQLite): job output and progress (see the PostgreSQL migration). `output` is
-- JSON text. Waiters learn of finished jobs through the store's change signal (data_version),
-- so no trigger is needed.
ALTER TABLE chronoq_jobs ADD COLUMN output TEXT;
ALTER TABLE chronoq_jobs ADD COLUMN progress REAL CHECK (progress BETWEEN 0 AND 1);
ALTER TABLE chronoq_jobs ADD COLUMN progress_note TEXT;
