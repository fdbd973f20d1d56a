DROP TABLE IF EXISTS chronoq_jobs;
