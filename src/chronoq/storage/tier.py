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

from chronoq.errors import ConfigError

MAX_PARTITIONS = 1024


def check_partition_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PARTITIONS:
        raise ConfigError(f"the partition count must be from 1 to {MAX_PARTITIONS}, got {count!r}")
