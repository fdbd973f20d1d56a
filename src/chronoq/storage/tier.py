"""Tiered dispatch in the store: what both adapters share.

A partition leader stages near-due jobs; a worker confirms in the store each stream entry it
reads, by id and the lease token the job was staged with:

```
 job_stage_candidates ──► (id, lease_token, queue, run_at) ──► Redis ──► stream entry
                                                                              │
 job_claim_ids([(id, token), ...]) ◄──────────────────────── worker ◄─────────┘
   jobs   started now: attempt + 1, a new token, the lease on the database clock
   early  pending with that token but not due yet (id -> run_at): stage it again
   busy   locked by another transaction right now: ask again soon
   gone   nothing to run: missing, no longer pending, another token, a paused or limited
          queue, or a `skip` misfire past its grace (now skipped)
```

Each adapter's SQL gives every distinct id it is sent exactly one verdict; the functions here
keep out what a database cannot compare, check a leader's parameters, and turn the rows into
`IdClaim` and `Staging` values. The partition count is recorded once per database
(`tier_partitions`): a job's partition is its id modulo the count, so a count that changed
while timers are staged would hand jobs to leaders that never staged them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from chronoq.core.jobs import MAX_ID, Job
from chronoq.errors import ConfigError
from chronoq.storage.base import IdClaim, JobLeaseRef, JobStageParams, StageRow, Staging

MAX_PARTITIONS = 1024
MAX_HORIZON = 100 * 365 * 86400.0  # seconds; whatever lies further is not staged anyway
MIN_TOKEN = -(2**63)  # lease tokens are bigint; a token outside this range matches no job

# Verdicts the adapters' SQL gives an id (SQLite's 'start' and 'skip' are acted on in Python
# before the result is built; PostgreSQL's 'job' rows carry the started job).
EARLY, BUSY, GONE, SKIP = "early", "busy", "gone", "skip"

TimeReader = Callable[[Any], datetime | None]


def check_partition_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PARTITIONS:
        raise ConfigError(f"the partition count must be from 1 to {MAX_PARTITIONS}, got {count!r}")


def check_stage_params(params: JobStageParams) -> None:
    """A leader's request names partitions that exist under its count, and looks ahead."""
    check_partition_count(params.partition_count)
    if params.horizon < timedelta(0):
        raise ConfigError(f"the staging horizon must not be negative, got {params.horizon}")
    outside = sorted({p for p in params.partitions if not 0 <= p < params.partition_count})
    if outside:
        raise ConfigError(
            f"partitions {outside} do not exist with a partition count of "
            f"{params.partition_count} (they run from 0 to {params.partition_count - 1})"
        )


def stage_horizon_seconds(params: JobStageParams) -> float:
    """The horizon in seconds, bounded so that the database can add it to its clock."""
    return min(params.horizon.total_seconds(), MAX_HORIZON)


def storable_refs(refs: Sequence[JobLeaseRef]) -> tuple[list[JobLeaseRef], set[int]]:
    """The refs a database can compare, and the ids named only by others (no job has such an id
    or token: they are gone without asking; the drivers would refuse to send them)."""
    kept = [r for r in refs if 1 <= r.id <= MAX_ID and MIN_TOKEN <= r.lease_token <= MAX_ID]
    kept_ids = {r.id for r in kept}
    return kept, {r.id for r in refs if r.id not in kept_ids}


def id_claim(
    db_now: datetime,
    jobs: Iterable[Job],
    verdicts: Iterable[tuple[int, str, datetime | None]],
    also_gone: Iterable[int] = (),
) -> IdClaim:
    """The `IdClaim` of started `jobs` and of (id, verdict, run_at) rows for the others."""
    early: dict[int, datetime] = {}
    busy: set[int] = set()
    gone = set(also_gone)
    for job_id, verdict, run_at in verdicts:
        if verdict == EARLY and run_at is not None:
            early[job_id] = run_at
        elif verdict == BUSY:
            busy.add(job_id)
        elif verdict in (GONE, SKIP):
            gone.add(job_id)
    started = sorted(jobs, key=lambda job: job.id)
    return IdClaim(started, dict(sorted(early.items())), sorted(busy), sorted(gone), db_now)


def staging(db_now: datetime, rows: Iterable[Mapping[str, Any]], to_time: TimeReader) -> Staging:
    """Rows of `job_stage_candidates` (a row without an id only carries the clock)."""
    staged = []
    for row in rows:
        if row["id"] is None:
            continue
        run_at = to_time(row["run_at"])
        assert run_at is not None
        staged.append(StageRow(int(row["id"]), int(row["lease_token"]), row["queue"], run_at))
    return Staging(staged, db_now)
