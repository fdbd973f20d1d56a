-- PostgreSQL: chronoq_leaders and the advisory locks of leader election
-- (chronoq.coordination.postgres). A lock and its row are named by a record key: the duty for
-- its partition 0, "duty/N" for partition N (chronoq.coordination.records.record_key).
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Every time decision uses the database clock: coalesce(%(now)s, clock_timestamp()) lets
-- tests pin it and leaves production on the server's clock.

-- name: leader_try_lock
SELECT pg_try_advisory_lock(hashtext('chronoq:leader'), hashtext(%(duty)s)) AS locked

-- name: leader_unlock
SELECT pg_advisory_unlock(hashtext('chronoq:leader'), hashtext(%(duty)s)) AS unlocked

-- name: leader_record
-- Written by the holder of the advisory lock: a new holder starts the next term.
INSERT INTO chronoq_leaders (duty, holder, term, elected_at, renewed_at, expires_at)
VALUES (%(duty)s, %(holder)s, 1, clock_timestamp(), clock_timestamp(),
        clock_timestamp() + %(ttl)s * interval '1 second')
ON CONFLICT (duty) DO UPDATE
SET term = CASE WHEN chronoq_leaders.holder = excluded.holder
                THEN chronoq_leaders.term ELSE chronoq_leaders.term + 1 END,
    elected_at = CASE WHEN chronoq_leaders.holder = excluded.holder
                      THEN chronoq_leaders.elected_at ELSE excluded.elected_at END,
    holder = excluded.holder,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
RETURNING *

-- name: leader_forget
-- Resigns by (holder, term): a row a successor already wrote is left alone. The row stays,
-- expired, so the next holder's term still counts up from it.
UPDATE chronoq_leaders SET expires_at = clock_timestamp()
WHERE duty = %(duty)s AND holder = %(holder)s AND term = %(term)s

-- name: leader_get
SELECT * FROM chronoq_leaders WHERE duty = %(duty)s

-- name: leader_list
-- The terms not yet expired among the named records (the partitions of a duty).
SELECT * FROM chronoq_leaders
WHERE duty = ANY(%(duties)s) AND expires_at > coalesce(%(now)s::timestamptz, clock_timestamp())
ORDER BY duty
