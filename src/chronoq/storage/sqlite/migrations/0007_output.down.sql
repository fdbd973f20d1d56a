-- chronoq 0007 down (SQLite): forgets job output and progress.
ALTER TABLE chronoq_jobs DROP COLUMN progress_note;
ALTER TABLE chronoq_jobs DROP COLUMN progress;
ALTER TABLE chronoq_jobs DROP COLUMN output;
