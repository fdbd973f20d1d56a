-- chronoq 0008 down (SQLite): forgets keys unique for a period and the jobs' trace context.
DROP TABLE chronoq_unique_keys;
ALTER TABLE chronoq_jobs DROP COLUMN trace_context;
