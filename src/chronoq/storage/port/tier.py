"""Tiered dispatch's part of the store port: staging candidates, claims by id, the partition
count (`chronoq.storage.tier` holds what the adapters share to implement it).

Its statements are in each dialect's `jobs.sql` and `tier.sql`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from chronoq.core.jobs import Job
from chronoq.storage.port.jobs import JobLeaseRef


@dataclass(frozen=True, slots=True)
class JobClaimIdsParams:
    """Claim these jobs by id, each only while it is still pending with the lease token it was
    staged with and due on the database clock (tiered dispatch: a worker confirms the stream
    entries it read). The attempt starts exactly as in `job_claim_with_wakeup`: attempt + 1, a
    new token, the lease on the database clock, the task settings as in `JobClaimParams`."""

    refs: Sequence[JobLeaseRef]
    worker_id: str
    now: datetime | None = None
    leases: Mapping[str, float] = field(default_factory=dict)
    max_attempts: Mapping[str, int] = field(default_factory=dict)
    default_max_attempts: int = 20


@dataclass(frozen=True, slots=True)
class IdClaim:
    """What `job_claim_ids` did with each id it was given, exactly one of:

    `jobs`: claimed now. `early`: pending with that token but not yet due (id -> run_at): ask
    again at run_at. `busy`: locked by another transaction at this instant: ask again soon.
    `gone`: nothing to run for this entry (missing, no longer pending, the token moved on, its
    queue is paused or limited, or a `skip` misfire past its grace, now skipped): drop it. A
    limited queue's jobs are left to the database claim path, which enforces the limits.
    Each list is in id order."""

    jobs: list[Job]
    early: dict[int, datetime]
    busy: list[int]
    gone: list[int]
    db_now: datetime


@dataclass(frozen=True, slots=True)
class JobStageParams:
    """Pending jobs of these partitions (partition = id % `partition_count`) due within
    `horizon` of the database clock, with ids above `after_id`, in id order, at most `limit`.
    Jobs of paused queues and of queues with rate, concurrency or key limits are left out: they
    stay on the database claim path."""

    partitions: Sequence[int]
    partition_count: int
    horizon: timedelta
    after_id: int = 0
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class StageRow:
    id: int
    lease_token: int
    queue: str
    run_at: datetime


@dataclass(frozen=True, slots=True)
class Staging:
    """Rows to stage and the database clock they were read at. `read_at`, when the adapter
    knows it, is the local time.monotonic() of that reading: the midpoint of the statement's
    own round trip, without the wait for a pooled connection."""

    rows: list[StageRow]
    db_now: datetime
    read_at: float | None = field(default=None, compare=False)


class TierPort(Protocol):
    """What partition leaders and tiered workers need of the store."""

    def job_claim_ids(self, params: JobClaimIdsParams) -> IdClaim:
        """Claim by id (tiered dispatch); rows are locked in id order, skipping locked ones,
        so two workers confirming overlapping batches never deadlock."""
        ...

    def job_stage_candidates(self, params: JobStageParams) -> Staging:
        """Pending jobs a partition leader stages (see `JobStageParams`)."""
        ...

    def tier_partitions(self, requested: int) -> int:
        """The partition count of tiered dispatch, fixed at the first call on a store (which
        records `requested`); later calls return the recorded count whatever they ask."""
        ...
