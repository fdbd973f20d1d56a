-- chronoq 0004 down (SQLite): forgets the partition count of tiered dispatch.
DROP TABLE IF EXISTS chronoq_tier;
