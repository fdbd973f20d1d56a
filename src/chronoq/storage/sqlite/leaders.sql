-- SQLite: chronoq_leaders, the lock rows of leader election (chronoq.coordination.sqlite). A
-- row is named by a record key: the duty for its partition 0, "duty/N" for partition N.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Times are integer microseconds since the epoch (UTC); :now is the store's clock reading
-- taken inside the write transaction (the host clock is the database clock of an embedded
-- database). Batches arrive as JSON arrays and are unpacked with json_each.

-- name: leader_acquire
-- The lock row: taken when free or expired, renewed by its holder; a new holder starts the
-- next term. Nothing is returned when another holds an unexpired lock.
INSERT INTO chronoq_leaders (duty, holder, term, elected_at, renewed_at, expires_at)
VALUES (:duty, :holder, 1, :now, :now, :expires_at)
ON CONFLICT (duty) DO UPDATE
SET term = CASE WHEN chronoq_leaders.holder = excluded.holder
                THEN chronoq_leaders.term ELSE chronoq_leaders.term + 1 END,
    elected_at = CASE WHEN chronoq_leaders.holder = excluded.holder
                      THEN chronoq_leaders.elected_at ELSE excluded.elected_at END,
    holder = excluded.holder,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
WHERE chronoq_leaders.holder = excluded.holder OR chronoq_leaders.expires_at <= excluded.renewed_at
RETURNING *

-- name: leader_forget
-- Resigns by (holder, term): a row a successor already took is left alone. The row stays,
-- expired, so the next holder's term still counts up from it.
UPDATE chronoq_leaders SET expires_at = :now
WHERE duty = :duty AND holder = :holder AND term = :term

-- name: leader_get
SELECT * FROM chronoq_leaders WHERE duty = :duty

-- name: leader_list
-- The terms not yet expired among the named records (the partitions of a duty).
SELECT * FROM chronoq_leaders
WHERE duty IN (SELECT value FROM json_each(:duties)) AND expires_at > :now
ORDER BY duty
