"""PostgreSQL leadership: a session advisory lock per (duty, partition), its term in a row.

```
 candidate A ──pg_try_advisory_lock(key)──► granted: A leads, writes term N in chronoq_leaders
 candidate B ──pg_try_advisory_lock(key)──► refused: B stands by and asks again at each step
 A's process dies / its connection drops ──► the server ends A's session and frees the lock
 candidate B ──pg_try_advisory_lock(key)──► granted: B leads, term N+1
```
The locks belong to the session of a connection kept for nothing else, so they last exactly as
long as that connection: no lease to renew, and a leader that was SIGKILLed is replaced at the
next step of a standby. Each step of the leader runs a statement on that connection; when it
fails the leader steps down at once, because the server may already have ended its session and
granted the lock to another. TCP keepalives bound how long a server keeps the session of a
leader whose machine vanished. The row's `expires_at` (renewal + ttl) is for readers: a row
past it belongs to a leader that stopped renewing.

The lock must be held by a real session: a pooler in transaction mode (PgBouncer) in front of
PostgreSQL would break it, so point the scheduler at the server or at a session-mode pool.

A leader that is partitioned but still believes it leads can overlap a new leader for a short
while (until its trust window ends). Each duty is safe under that: a schedule's tick is inserted
under a unique (schedule, tick) index after locking the schedule's row, rescues and prunes are
idempotent, and the tier's writes carry the epoch.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row

from chronoq.coordination.base import LeaderTerm
from chronoq.coordination.records import LeaderRecords, NotConfirmed, RecordedElector
from chronoq.storage.postgres.session import Q, configure_session
from chronoq.storage.rows import leader_term

__all__ = ["PostgresElector"]

# libpq keepalives: a server notices a vanished leader's connection within about 11 s.
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


class PostgresRecords(LeaderRecords, Protocol):
    dsn: str


class PostgresElector(RecordedElector):
    """`PartitionElector` holding a session-level advisory lock per partition of `duty`, on a
    connection of its own to `store`'s database (the store reads the rows for `leaders()`)."""

    def __init__(
        self, store: PostgresRecords, duty: str, holder: str, ttl: float, partitions: int = 1
    ) -> None:
        super().__init__(store, duty, holder, ttl, partitions)
        self._dsn = store.dsn
        self._conn: psycopg.Connection[dict[str, Any]] | None = None
        self._locked: set[str] = set()  # the keys whose lock this session holds

    def _claim(self, key: str) -> LeaderTerm | None:
        try:
            conn = self._connection()
            if key not in self._locked:
                row = conn.execute(Q["leader_try_lock"], {"duty": key}).fetchone()
                if not (row and row["locked"]):
                    return None
                self._locked.add(key)
            args = {"duty": key, "holder": self.holder, "ttl": self.ttl}
            record = conn.execute(Q["leader_record"], args).fetchone()
        except psycopg.Error:
            # The session may be gone, and the locks with it: whoever holds them, not us.
            self._drop()
            raise NotConfirmed from None
        return leader_term(record) if record else None

    def _resign(self, key: str, term: LeaderTerm) -> None:
        if self._conn is None or key not in self._locked:
            return
        args = {"duty": key, "holder": self.holder, "term": term.term}
        try:
            self._conn.execute(Q["leader_forget"], args)
            self._conn.execute(Q["leader_unlock"], {"duty": key})
        except psycopg.Error:
            self._drop()  # ending the session frees the lock all the same
        self._locked.discard(key)

    def _shut(self) -> None:
        self._drop()

    def _connection(self) -> psycopg.Connection[dict[str, Any]]:
        if self._conn is None or self._conn.closed:
            self._locked.clear()
            conn = psycopg.connect(
                self._dsn, autocommit=True, row_factory=dict_row, connect_timeout=5, **KEEPALIVES
            )
            configure_session(conn)
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        self._locked.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
