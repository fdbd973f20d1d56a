"""SQLite limited claims (the planning is `chronoq.storage.limited`'s), and the claim helpers
the store shares with them."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from chronoq.core.jobs import Job
from chronoq.core.ratelimit import Bucket, Candidate, ClaimPlan, KeyLimit, QueueLimits
from chronoq.storage.base import JobClaimIdsParams, JobClaimParams
from chronoq.storage.rows import datetime_to_micros, job_from_row, micros_to_datetime
from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.sqlite")


class SqliteLimitedIO:
    """`LimitedClaimIO` inside the claim's write transaction (which already serialises it)."""

    def __init__(self, db: sqlite3.Connection, now: int) -> None:
        self._db = db
        self._now = now

    def lock(self, queues: Sequence[str]) -> list[QueueLimits]:
        rows = self._db.execute(Q["job_claim_limited_lock"], {"queues": json.dumps(list(queues))})
        return [
            QueueLimits(
                row["name"],
                row["rate"],
                row["burst"],
                row["concurrency"],
                row["tokens"],
                micros_to_datetime(row["refilled_at"]),
            )
            for row in rows.fetchall()
        ]

    def now(self) -> datetime:
        now = micros_to_datetime(self._now)
        assert now is not None
        return now

    def candidates(self, queue: str, now: datetime, scan: int) -> list[Candidate]:
        args = {"queue": queue, "now": datetime_to_micros(now), "scan": scan}
        rows = self._db.execute(Q["job_claim_limited_candidates"], args).fetchall()
        return [Candidate(row["id"], row["rate_key"], bool(row["expired"])) for row in rows]

    def running(self, queue: str) -> int:
        row = self._db.execute(Q["job_claim_limited_running"], {"queue": queue}).fetchone()
        return int(row["running"])

    def key_limits(self, queue: str) -> list[KeyLimit]:
        rows = self._db.execute(Q["job_claim_limited_key_limits"], {"queue": queue}).fetchall()
        return [KeyLimit(row["pattern"], row["rate"], row["burst"]) for row in rows]

    def key_buckets(self, queue: str, keys: Sequence[str]) -> dict[str, Bucket]:
        args = {"queue": queue, "keys": json.dumps(list(keys))}
        rows = self._db.execute(Q["job_claim_limited_key_buckets"], args).fetchall()
        return {
            row["key"]: Bucket(1.0, 1.0, row["tokens"], micros_to_datetime(row["refilled_at"]))
            for row in rows
        }

    def apply(
        self, queue: QueueLimits, now: datetime, plan: ClaimPlan, params: JobClaimParams
    ) -> list[Job]:
        db, at = self._db, datetime_to_micros(now)
        if plan.skip:
            db.execute(Q["job_skip_ids"], {"ids": json.dumps(plan.skip), "now": at})
        if plan.defer:
            deferrals = [[job_id, datetime_to_micros(run_at)] for job_id, run_at in plan.defer]
            db.execute(Q["job_defer_many"], {"deferrals": json.dumps(deferrals)})
        jobs: list[Job] = []
        if plan.claim:
            jobs = claimed_jobs(db, "job_claim_ids", claim_ids_args(plan.claim, at, params))
        if plan.key_buckets:
            buckets = [
                [key, bucket.tokens, datetime_to_micros(bucket.refilled_at or now)]
                for key, bucket in plan.key_buckets.items()
            ]
            db.execute(
                Q["key_buckets_store"], {"queue": queue.name, "buckets": json.dumps(buckets)}
            )
        if plan.queue_bucket is not None:
            args = {"queue": queue.name, "tokens": plan.queue_bucket.tokens, "refilled_at": at}
            db.execute(Q["queue_bucket_store"], args)
        return jobs


def claim_ids_args(
    ids: list[int], now: int, params: JobClaimParams | JobClaimIdsParams
) -> dict[str, Any]:
    """Arguments of `job_claim_ids`: start these jobs at `now` for the claiming worker."""
    return claim_args(now, params) | {"ids": json.dumps(ids)}


def claim_args(now: int, params: JobClaimParams | JobClaimIdsParams) -> dict[str, Any]:
    """What every claim statement is told: the instant, the claiming worker and its settings."""
    return {
        "now": now,
        "worker_id": params.worker_id,
        "leases": json.dumps(dict(params.leases)),
        "max_attempts": json.dumps(dict(params.max_attempts)),
        "default_max_attempts": params.default_max_attempts,
    }


def claimed_jobs(db: sqlite3.Connection, query: str, args: dict[str, Any]) -> list[Job]:
    """The jobs a claim statement returns (RETURNING *). The rows come as plain tuples, made
    dicts by their column names once: a claim returns many rows, and `sqlite3.Row` finds a
    column by comparing its name with each of the row's, for every column read."""
    cursor = db.cursor()
    cursor.row_factory = None
    cursor.execute(Q[query], args)
    names = [column[0] for column in cursor.description]
    # The jobs of one claim share their start and lease instants, and jobs enqueued together
    # their creation and run_at: each instant becomes a datetime once per claim.
    to_time = functools.cache(micros_to_datetime)
    return [
        job_from_row(dict(zip(names, row, strict=True)), to_time, from_json)
        for row in cursor.fetchall()
    ]


def job_from_json_row(row: Mapping[str, Any]) -> Job:
    """A job from a row of chronoq_jobs, its times microseconds and its JSON columns text."""
    return job_from_row(row, micros_to_datetime, from_json)


def from_json(text: str) -> Any:
    """JSON text as Python values; the empty object and list (most payloads and histories)
    without a trip through the parser."""
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return json.loads(text)
