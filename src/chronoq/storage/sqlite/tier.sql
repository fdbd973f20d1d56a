-- SQLite: chronoq_tier — the partition count of tiered dispatch.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Both run in one write transaction, which already serialises concurrent first calls.

-- name: tier_record
INSERT INTO chronoq_tier (partitions, created_at) VALUES (:partitions, :now)
ON CONFLICT (singleton) DO NOTHING

-- name: tier_get
SELECT partitions FROM chronoq_tier
