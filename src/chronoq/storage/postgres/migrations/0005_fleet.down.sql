-- chronoq 0005 down: forgets the fleet registry.
DROP TABLE IF EXISTS chronoq_processes;
