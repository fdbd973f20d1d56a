"""PostgreSQL coordination: leader election by advisory lock, and limited claims.

Leadership
----------
```
 candidate A ──pg_try_advisory_lock(duty)──► granted: A leads, writes term N in chronoq_leaders
 candidate B ──pg_try_advisory_lock(duty)──► refused: B stands by and asks again each interval
 A's process dies / its connection drops ──► the server ends A's session and frees the lock
 candidate B ──pg_try_advisory_lock(duty)──► granted: B leads, term N+1
```
The lock belongs to the session of a connection kept for nothing else, so it lasts exactly as
long as that connection: no lease to renew, and a leader that was SIGKILLed is replaced at the
next attempt of a standby (within its election interval). Each attempt of the leader runs a
statement on that connection; when it fails the leader steps down at once, because the server
may already have ended its session and granted the lock to another. TCP keepalives bound how
long a server keeps the session of a leader whose machine vanished.

The lock must be held by a real session: a pooler in transaction mode (PgBouncer) in front of
PostgreSQL would break it, so point the scheduler at the server or at a session-mode pool.

A leader that is partitioned but still believes it leads can overlap a new leader for a short
while. Each duty is safe under that: a schedule's tick is inserted under a unique (schedule,
tick) index after locking the schedule's row, rescues and prunes are idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from chronoq.core.jobs import Job
from chronoq.core.ratelimit import Bucket, Candidate, ClaimPlan, KeyLimit, QueueLimits
from chronoq.storage.base import JobClaimParams, LeaderTerm
from chronoq.storage.postgres.session import Q, configure_session
from chronoq.storage.rows import job_from_row, leader_term

# libpq keepalives: a server notices a vanished leader's connection within about 11 s.
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


class PostgresElector:
    """`LeaderElector` holding a session-level advisory lock per duty."""

    def __init__(self, dsn: str, dsn_display: str, duty: str, holder: str, ttl: float) -> None:
        self.holder = holder
        self._dsn = dsn
        self._dsn_display = dsn_display
        self._duty = duty
        self._ttl = ttl
        self._conn: psycopg.Connection[dict[str, Any]] | None = None
        self._held = False

    def attempt(self) -> LeaderTerm | None:
        try:
            conn = self._connection()
            if not self._held:
                row = conn.execute(Q["leader_try_lock"], {"duty": self._duty}).fetchone()
                self._held = bool(row and row["locked"])
                if not self._held:
                    return None
            args = {"duty": self._duty, "holder": self.holder, "ttl": self._ttl}
            record = conn.execute(Q["leader_record"], args).fetchone()
            return leader_term(record) if record else None
        except psycopg.Error:
            # The session may be gone, and the lock with it: whoever holds it now, it is not us.
            self._drop()
            return None

    def resign(self) -> None:
        if self._conn is None or not self._held:
            return
        try:
            self._conn.execute(Q["leader_forget"], {"duty": self._duty, "holder": self.holder})
            self._conn.execute(Q["leader_unlock"], {"duty": self._duty})
        except psycopg.Error:
            self._drop()
        self._held = False

    def close(self) -> None:
        self.resign()
        self._drop()

    def _connection(self) -> psycopg.Connection[dict[str, Any]]:
        if self._conn is None or self._conn.closed:
            self._held = False
            conn = psycopg.connect(
                self._dsn, autocommit=True, row_factory=dict_row, connect_timeout=5, **KEEPALIVES
            )
            configure_session(conn)
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        self._held = False
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


class PostgresLimitedIO:
    """`LimitedClaimIO` on one connection, inside the transaction the caller opened."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self._conn = conn

    def lock(self, queues: Sequence[str]) -> list[QueueLimits]:
        rows = self._conn.execute(Q["job_claim_limited_lock"], {"queues": list(queues)})
        return [
            QueueLimits(
                row["name"],
                row["rate"],
                row["burst"],
                row["concurrency"],
                row["tokens"],
                row["refilled_at"],
            )
            for row in rows.fetchall()
        ]

    def now(self) -> datetime:
        row = self._conn.execute(Q["db_now"]).fetchone()
        assert row is not None
        now: datetime = row["now"]
        return now

    def candidates(self, queue: str, now: datetime, scan: int) -> list[Candidate]:
        args = {"queue": queue, "now": now, "scan": scan}
        rows = self._conn.execute(Q["job_claim_limited_candidates"], args).fetchall()
        return [Candidate(row["id"], row["rate_key"], bool(row["expired"])) for row in rows]

    def running(self, queue: str) -> int:
        row = self._conn.execute(Q["job_claim_limited_running"], {"queue": queue}).fetchone()
        return int(row["running"]) if row else 0

    def key_limits(self, queue: str) -> list[KeyLimit]:
        rows = self._conn.execute(Q["job_claim_limited_key_limits"], {"queue": queue})
        return [KeyLimit(row["pattern"], row["rate"], row["burst"]) for row in rows.fetchall()]

    def key_buckets(self, queue: str, keys: Sequence[str]) -> dict[str, Bucket]:
        args = {"queue": queue, "keys": list(keys)}
        rows = self._conn.execute(Q["job_claim_limited_key_buckets"], args).fetchall()
        return {row["key"]: Bucket(1.0, 1.0, row["tokens"], row["refilled_at"]) for row in rows}

    def apply(
        self, queue: QueueLimits, now: datetime, plan: ClaimPlan, params: JobClaimParams
    ) -> list[Job]:
        conn = self._conn
        if plan.skip:
            conn.execute(Q["job_skip_ids"], {"ids": plan.skip, "now": now})
        if plan.defer:
            ids = [job_id for job_id, _ in plan.defer]
            conn.execute(Q["job_defer_many"], {"ids": ids, "run_ats": [at for _, at in plan.defer]})
        jobs: list[Job] = []
        if plan.claim:
            rows = conn.execute(Q["job_claim_ids"], _claim_args(plan.claim, now, params))
            jobs = [job_from_row(row) for row in rows.fetchall()]
        if plan.key_buckets:
            conn.execute(Q["key_buckets_store"], _bucket_args(queue.name, plan.key_buckets))
        if plan.queue_bucket is not None:
            bucket = plan.queue_bucket
            conn.execute(
                Q["queue_bucket_store"],
                {"queue": queue.name, "tokens": bucket.tokens, "refilled_at": bucket.refilled_at},
            )
        return jobs


def _claim_args(ids: list[int], now: datetime, params: JobClaimParams) -> dict[str, Any]:
    return {
        "ids": ids,
        "now": now,
        "worker_id": params.worker_id,
        "leases": Jsonb(dict(params.leases)),
        "max_attempts": Jsonb(dict(params.max_attempts)),
        "default_max_attempts": params.default_max_attempts,
    }


def _bucket_args(queue: str, buckets: dict[str, Bucket]) -> dict[str, Any]:
    return {
        "queue": queue,
        "keys": list(buckets),
        "tokens": [bucket.tokens for bucket in buckets.values()],
        "refilled_ats": [bucket.refilled_at for bucket in buckets.values()],
    }
