-- chronoq 0013 down: chronoq_jobs is vacuumed on the server's defaults again.
ALTER TABLE chronoq_jobs RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    vacuum_index_cleanup
);
