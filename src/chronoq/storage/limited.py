"""Claims from limited queues, shared by the adapters.

A queue with a rate, a concurrency limit or key limits is claimed from in a transaction that
first locks its row in `chronoq_queues`. The lock serialises the claimers of that queue, so its
buckets and its count of running jobs are read and charged by one claimer at a time, on the
database clock read after the lock was granted. Unlimited queues never take this path: their
claim stays one statement with SKIP LOCKED.

Each adapter supplies the reads and writes (`LimitedClaimIO`); what to take, skip, defer and
charge is decided by `chronoq.core.ratelimit.plan_limited_claim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from chronoq.core.jobs import Job
from chronoq.core.ratelimit import (
    Bucket,
    Candidate,
    ClaimPlan,
    KeyLimit,
    QueueLimits,
    plan_limited_claim,
    rate_keys,
)
from chronoq.storage.base import JobClaimParams

# With key limits a claim looks past the jobs it can take, so that a key out of tokens has its
# due jobs moved to their turn in bigger steps and stops hiding other keys' jobs sooner.
KEY_SWEEP = 200


class LimitedClaimIO(Protocol):
    """One adapter's statements for a limited claim, all inside one transaction."""

    def lock(self, queues: Sequence[str]) -> list[QueueLimits]: ...

    def now(self) -> datetime: ...

    def candidates(self, queue: str, now: datetime, scan: int) -> list[Candidate]: ...

    def running(self, queue: str) -> int: ...

    def key_limits(self, queue: str) -> list[KeyLimit]: ...

    def key_buckets(self, queue: str, keys: Sequence[str]) -> dict[str, Bucket]:
        """Stored buckets by key; their rate and burst are replaced by the matching limit's."""
        ...

    def apply(
        self, queue: QueueLimits, now: datetime, plan: ClaimPlan, params: JobClaimParams
    ) -> list[Job]: ...


def claim_limited(
    io: LimitedClaimIO, queues: Sequence[str], params: JobClaimParams, limit: int
) -> tuple[list[Job], datetime | None]:
    """Claim up to `limit` jobs from `queues`; return them and when to look again regardless
    of new jobs (the next token, a concurrency recheck, a deferred job's turn), if ever."""
    states = io.lock(sorted(set(queues)))
    if not states:
        return [], None
    # Running jobs are counted before the clock is read: a job that finishes in between is
    # still counted (the safe side), so no job of ours starts before the one it replaces ends.
    running = {q.name: io.running(q.name) for q in states if q.concurrency is not None}
    now = io.now()
    jobs: list[Job] = []
    look_again: datetime | None = None
    for queue in states:
        remaining = limit - len(jobs)
        if remaining <= 0:
            return jobs, now
        claimed, again = _claim_from(io, queue, now, remaining, running.get(queue.name, 0), params)
        jobs.extend(claimed)
        look_again = _earliest(look_again, again)
    return jobs, look_again


def _claim_from(
    io: LimitedClaimIO,
    queue: QueueLimits,
    now: datetime,
    limit: int,
    running: int,
    params: JobClaimParams,
) -> tuple[list[Job], datetime | None]:
    key_limits = io.key_limits(queue.name)
    scan = limit + KEY_SWEEP if key_limits else limit
    candidates = io.candidates(queue.name, now, scan)
    if not candidates:
        return [], None
    buckets = io.key_buckets(queue.name, rate_keys(candidates)) if key_limits else {}
    plan = plan_limited_claim(now, limit, queue, running, candidates, key_limits, buckets)
    jobs = io.apply(queue, now, plan, params)
    again = plan.look_again_at
    if plan.defer:
        # The deferred jobs' new turns, and, when the scan was full, the jobs behind them.
        again = _earliest(again, min(run_at for _, run_at in plan.defer))
        if len(candidates) == scan:
            again = now
    if plan.skip and len(jobs) < limit:
        again = now
    return jobs, again


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)
