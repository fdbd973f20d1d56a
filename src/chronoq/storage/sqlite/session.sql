-- SQLite: connection pragmas, migrations bookkeeping and the write transaction.
-- Each block is one statement, named by `-- name:`; names are unique across this folder's
-- files. Times are integer microseconds since the epoch (UTC); :now is the store's clock reading
-- taken inside the write transaction (the host clock is the database clock of an embedded
-- database). Batches arrive as JSON arrays and are unpacked with json_each.

-- name: journal_mode_wal
-- WAL lets readers go on while one connection writes; the mode is stored in the file.
PRAGMA journal_mode = WAL

-- name: synchronous_normal
-- In WAL mode NORMAL loses no committed transaction on a process crash, only on power loss.
PRAGMA synchronous = NORMAL

-- name: migrations_table
CREATE TABLE IF NOT EXISTS chronoq_migrations (
    name       TEXT PRIMARY KEY,
    applied_at INTEGER NOT NULL
)

-- name: migrations_applied
SELECT name FROM chronoq_migrations ORDER BY name

-- name: migrations_record
INSERT INTO chronoq_migrations (name, applied_at) VALUES (:name, :now)

-- name: migrations_forget
-- A migration undone by its down file: applying it again is pending work.
DELETE FROM chronoq_migrations WHERE name = :name

-- name: data_version
PRAGMA data_version

-- name: begin_write
-- Takes the write lock before anything is read: two writers queue here instead of failing
-- with SQLITE_BUSY when a read lock would have to be upgraded.
BEGIN IMMEDIATE

-- name: commit
COMMIT

-- name: rollback
ROLLBACK
