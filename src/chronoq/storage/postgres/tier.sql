-- PostgreSQL: chronoq_tier — the partition count of tiered dispatch.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files.

-- name: tier_record
-- The first call on a database records its count; a concurrent first call waits here for the
-- other's insert to commit, then does nothing. Reading the count back takes a statement of its
-- own (tier_get): one snapshot taken before that commit would not see the row.
INSERT INTO chronoq_tier (partitions) VALUES (%(partitions)s)
ON CONFLICT (singleton) DO NOTHING

-- name: tier_get
SELECT partitions FROM chronoq_tier
