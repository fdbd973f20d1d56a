-- chronoq 0013: chronoq_jobs is vacuumed after a fixed number of dead rows, indexes included.
-- A claim reads the due jobs from the left of chronoq_jobs_claim_idx, where the entry of every
-- job claimed since the last vacuum stays (no insert lands there to split and clear a page), so
-- claims slow down as they pile up: a claim of 100 took 1.5-2.2 times as long after 500,000
-- (bench/claim_head.md). By default autovacuum waits for a fifth of the table's rows to be dead
-- (two a job: its claim and its finish), some 300,000 jobs on a table of 3,000,000; and a
-- vacuum that finds dead rows on fewer than 2% of the table's pages skips the indexes, so on a
-- table of 20,000,000 rows a vacuum after 50,000 jobs left the claim's entries where they were.
-- Here: after 50,000 dead rows whatever the table's size, and the indexes every time (0.3 s
-- for that table of 20,000,000 rows, its indexes cached). A DBA may set other values with
-- ALTER TABLE; the lock this takes lets reads and writes go on.
ALTER TABLE chronoq_jobs SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 50000,
    vacuum_index_cleanup = on
);
