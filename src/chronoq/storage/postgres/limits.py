"""PostgreSQL limited claims: the claim's reads and writes under rate and concurrency limits
(the planning is `chronoq.storage.limited`'s)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chronoq.core.jobs import Job
from chronoq.core.ratelimit import Bucket, Candidate, ClaimPlan, KeyLimit, QueueLimits
from chronoq.storage.base import JobClaimParams
from chronoq.storage.postgres.session import Q
from chronoq.storage.rows import job_from_row


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
