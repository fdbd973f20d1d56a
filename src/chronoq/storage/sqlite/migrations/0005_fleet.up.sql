-- chronoq 0005 (SQLite): the fleet registry (see the PostgreSQL migration). Times are
-- microseconds since the epoch, lists and task settings JSON text, as in the other tables.
CREATE TABLE chronoq_processes (
    id          TEXT    NOT NULL PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('worker', 'scheduler', 'server')),
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    version     TEXT    NOT NULL,
    queues      TEXT    NOT NULL DEFAULT '[]',
    concurrency INTEGER,
    tasks       TEXT    NOT NULL DEFAULT '[]',
    duties      TEXT    NOT NULL DEFAULT '[]',
    running     INTEGER NOT NULL DEFAULT 0 CHECK (running >= 0),
    started_at  INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    stopped_at  INTEGER
);
