"""How jobs go into SQLite: every insert path of the store, beside the adapter itself.

```
 job_insert_many ── with the caller's connection ──► _insert_one each
      └── in a write transaction of the store's ───► _insert_batch
                  ├── keyless, ≥ 64 ──► _insert_keyless (one executemany, ids numbered here)
                  └── otherwise ──────► _insert_one each (INSERT; a key's live holder)
                                          └ unique for a period: _insert_unique
 job_insert_stream ──► _insert_keyless up to the first keyed job, then _insert_batch
```

Every path runs inside one write transaction (BEGIN IMMEDIATE, or the caller's), which keeps
every other enqueue out until it commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from chronoq.core.enqueue import all_created
from chronoq.storage.base import JobInsertParams, JobInsertResult
from chronoq.storage.rows import datetime_to_micros
from chronoq.storage.sqlite.session import Q
from chronoq.storage.sqlstore import goes_in_bulk, until_keyed


def insert_streamed(
    db: sqlite3.Connection, jobs: Iterator[JobInsertParams], now: int
) -> list[JobInsertResult]:
    """`job_insert_stream`'s bulk path (see `SqlStore._insert_streamed`), in `db`'s write
    transaction."""
    keyed: list[JobInsertParams] = []
    stored = _insert_keyless(db, until_keyed(jobs, keyed), now)
    if not keyed:
        return stored
    return stored + insert_batch(db, [*keyed, *jobs], now)


def _insert_args(job: JobInsertParams, now: int) -> dict[str, Any]:
    run_at = (
        datetime_to_micros(job.run_at)
        if job.run_at is not None
        else now + int(job.delay_seconds * 1_000_000)
    )
    return {
        "queue": job.queue,
        "task": job.task,
        "payload": job.payload_json,
        "priority": job.priority,
        "run_at": run_at,
        "max_attempts": job.max_attempts,
        "lease_seconds": job.lease_seconds,
        "key": job.key,
        "now": now,
        "misfire": job.misfire,
        "misfire_grace": job.misfire_grace,
        "rate_key": job.rate_key,
        "trace_context": job.trace_context,
    }


def insert_batch(
    db: sqlite3.Connection, jobs: Sequence[JobInsertParams], now: int
) -> list[JobInsertResult]:
    if goes_in_bulk(jobs):
        return _insert_keyless(db, jobs, now)
    return [insert_one(db, job, now) for job in jobs]


def _insert_keyless(
    db: sqlite3.Connection, jobs: Iterable[JobInsertParams], now: int
) -> list[JobInsertResult]:
    """Keyless jobs in one executemany, each taken from `jobs` as it is written. Ids are handed
    out here, which is safe because the caller holds the write lock (BEGIN IMMEDIATE): nobody
    else can insert meanwhile."""
    first = int(db.execute(Q["job_next_id"]).fetchone()[0])
    written = 0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal written
        for job in jobs:
            yield _insert_args(job, now) | {"id": first + written}
            written += 1  # executemany asks for the next row until there is none

    db.executemany(Q["job_insert_with_id"], rows())
    return all_created(range(first, first + written))


def insert_one(db: sqlite3.Connection, job: JobInsertParams, now: int) -> JobInsertResult:
    if job.unique_for is not None:
        return _insert_unique(db, job, now)
    row = db.execute(Q["job_insert"], _insert_args(job, now)).fetchone()
    if row is not None:
        return JobInsertResult(row[0], created=True)
    # Inside one write transaction nobody else can free the key between the two statements.
    existing = db.execute(Q["job_live_id_by_key"], {"key": job.key}).fetchone()
    return JobInsertResult(existing[0], created=False)


def _insert_unique(db: sqlite3.Connection, job: JobInsertParams, now: int) -> JobInsertResult:
    """A job unique for a period: the key's taker within the period, else the live job holding
    the key, else a new job recorded as its taker. The write transaction (BEGIN IMMEDIATE, or
    the caller's) keeps every other enqueue out until it commits."""
    assert job.unique_for is not None
    key = {"key": job.key, "period": int(job.unique_for * 1_000_000)}
    taker = db.execute(Q["job_unique_taker"], key | {"now": now}).fetchone()
    if taker is not None:
        db.execute(Q["job_unique_keep"], key)
        return JobInsertResult(taker[0], created=False)
    live = db.execute(Q["job_live_by_key"], key).fetchone()
    if live is not None:
        job_id, enqueued_at, created = live[0], live[1], False
    else:
        job_id = db.execute(Q["job_insert"], _insert_args(job, now)).fetchone()[0]
        enqueued_at, created = now, True
    db.execute(Q["job_unique_record"], key | {"job_id": job_id, "enqueued_at": enqueued_at})
    return JobInsertResult(job_id, created=created)
