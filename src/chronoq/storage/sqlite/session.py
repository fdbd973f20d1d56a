"""What every SQLite connection of chronoq shares: its queries, its clock (integer
microseconds since the epoch), and how a connection is opened (WAL, the busy timeout)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from chronoq.errors import StoreUnavailable
from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.sqlite")
BUSY_TIMEOUT_MS = 30_000
CHANGE_POLL_SECONDS = 0.02


def now_micros() -> int:
    return time.time_ns() // 1000


def connect(path: str) -> sqlite3.Connection:
    folder = Path(path).parent
    if not folder.exists():
        raise StoreUnavailable(f"cannot open SQLite database {path!r}: {folder} does not exist")
    try:
        # The timeout is SQLite's busy timeout: how long a writer waits for another's lock.
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"cannot open SQLite database {path!r}: {exc}") from None
    try:
        db.row_factory = sqlite3.Row
        _enable_wal(db)
        db.execute(Q["synchronous_normal"])
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreUnavailable(f"cannot open SQLite database {path!r}: {exc}") from None
    return db


def _enable_wal(db: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting out other connections doing the same.

    The switch needs an exclusive lock and SQLite does not call the busy handler for it, so
    several processes opening a new file at once would otherwise fail with "database is locked".
    Once the file is in WAL mode (it stays so) the statement takes no lock at all.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            db.execute(Q["journal_mode_wal"])
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)  # back off: a retry loop, not test synchronisation
        pause = min(pause * 2, 0.05)
