"""How jobs go into PostgreSQL: every insert path of the store, beside the adapter itself.

```
 job_insert_many ── one job ──────────► _insert_one (INSERT; a key's retry loop)
      │                                   └ unique for a period: _insert_unique (advisory lock)
      ├── keys unique for a period ────► job_unique_lock, then _insert_one each
      └── a batch ── keyless, ≥ 64 ────► _copy_rows (binary COPY, ids read back)
                  └─ keyed or fewer ───► job_insert_many (unnest, ids reserved up front)
 job_insert_stream ─────────────────────► _copy_rows up to the first keyed job, then as above
 job_insert_many_async (caller's async connection) ─► the same statements, awaited
```

Why COPY and how its ids are read back: docs/design.md, "Bulk enqueue".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from chronoq.core.enqueue import all_created
from chronoq.errors import StoreError, StoreUnavailable
from chronoq.storage.base import JobInsertParams, JobInsertResult
from chronoq.storage.postgres.session import Q
from chronoq.storage.sqlstore import goes_in_bulk, until_keyed


def insert_on(
    conn: psycopg.Connection[Any], params: Sequence[JobInsertParams]
) -> list[JobInsertResult]:
    """Insert jobs on `conn`, as its transaction stands: one alone, each of those unique for a
    period under its key's lock, a keyless batch by COPY, a keyed batch by one INSERT."""
    with conn.cursor(row_factory=dict_row) as cur:
        if len(params) == 1:
            return [_insert_one(cur, params[0])]
        unique_keys = _unique_keys(params)
        if unique_keys:
            # One job at a time, each unique one under its key's lock, all taken first.
            cur.execute(Q["job_unique_lock"], {"keys": unique_keys})
            return [_insert_one(cur, job) for job in params]
        return _insert_bulk(cur, params)


def insert_streamed(
    conn: psycopg.Connection[Any], jobs: Iterator[JobInsertParams]
) -> list[JobInsertResult]:
    """`job_insert_stream`'s bulk path (see `SqlStore._insert_streamed`), in one transaction."""
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        keyed: list[JobInsertParams] = []
        copied = all_created(_copy_rows(cur, until_keyed(jobs, keyed)))
        if not keyed:
            return copied
        return copied + insert_on(conn, [*keyed, *jobs])


async def insert_many_async(conn: Any, params: Sequence[JobInsertParams]) -> list[JobInsertResult]:
    """`insert_on` on a caller's async psycopg connection, inside its transaction."""
    if not params:
        return []
    async with conn.cursor(row_factory=dict_row) as cur:
        unique_keys = _unique_keys(params)
        if unique_keys:
            await cur.execute(Q["job_unique_lock"], {"keys": unique_keys})
            return [await _insert_one_async(cur, job) for job in params]
        await cur.execute(Q["job_reserve_ids"], {"count": len(params)})
        reserved = await cur.fetchone()
        assert reserved is not None
        ids: list[int] = sorted(reserved["ids"])
        args = _unnest_args(ids, _run_ats(reserved["now"], params), params)
        await cur.execute(Q["job_insert_many"], args)
        created = {row["id"] for row in await cur.fetchall()}
        missing = _missing_keys(ids, created, params)
        live: dict[str, int] = {}
        if missing:
            await cur.execute(Q["job_live_ids_by_key"], {"keys": missing})
            live = {row["key"]: row["id"] for row in await cur.fetchall()}
    return _results(ids, created, live, params)


def _insert_args(job: JobInsertParams) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "task": job.task,
        "payload": job.payload_json,
        "priority": job.priority,
        "run_at": job.run_at,
        "delay": job.delay_seconds,
        "max_attempts": job.max_attempts,
        "lease_seconds": job.lease_seconds,
        "key": job.key,
        "misfire": job.misfire,
        "misfire_grace": job.misfire_grace,
        "rate_key": job.rate_key,
        "trace_context": job.trace_context,
        "unique_for": job.unique_for,
    }


def _insert_one(cur: psycopg.Cursor[dict[str, Any]], job: JobInsertParams) -> JobInsertResult:
    if job.unique_for is not None:
        return _insert_unique(cur, job)
    args = _insert_args(job)
    # A live job holding the key may finish between our INSERT and our look-up; then the key is
    # free again and the next INSERT succeeds, so this settles within a few rounds.
    for _ in range(10):
        row = cur.execute(Q["job_insert"], args).fetchone()
        if row is not None:
            return JobInsertResult(row["id"], created=True)
        existing = cur.execute(Q["job_live_ids_by_key"], {"keys": [job.key]}).fetchone()
        if existing is not None:
            return JobInsertResult(existing["id"], created=False)
    raise StoreUnavailable(f"could not settle the key {job.key!r}: it keeps changing hands")


def _insert_unique(cur: psycopg.Cursor[dict[str, Any]], job: JobInsertParams) -> JobInsertResult:
    """A job unique for a period: the key's taker within the period, else the live job holding
    the key, else a new job recorded as its taker. In a transaction, whose advisory lock on
    the key makes concurrent enqueues of it take turns until it ends."""
    args = _insert_args(job)
    with _in_transaction(cur.connection):
        # A keyed enqueue without a period does not take the lock: when one takes the key
        # between the two statements, the next round finds its job.
        for _ in range(10):
            holder = cur.execute(Q["job_unique_holder"], args).fetchone()
            if holder is not None and holder["id"] is not None:
                return JobInsertResult(holder["id"], created=False)
            row = cur.execute(Q["job_insert_unique"], args).fetchone()
            if row is not None:
                return JobInsertResult(row["id"], created=True)
    raise StoreUnavailable(f"could not settle the key {job.key!r}: it keeps changing hands")


def _unique_keys(jobs: Sequence[JobInsertParams]) -> list[str]:
    return [job.key for job in jobs if job.unique_for is not None and job.key is not None]


def _in_transaction(conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
    """A transaction of its own for a connection in autocommit mode (the store's) outside one;
    a transaction already open is joined as it is: psycopg's `transaction()` inside one would
    make a savepoint, and on a caller's connection with no statement run yet would commit the
    caller's work at its end."""
    idle = conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE
    return conn.transaction() if conn.autocommit and idle else contextlib.nullcontext()


async def _insert_one_async(cur: Any, job: JobInsertParams) -> JobInsertResult:
    """`_insert_one` on an async cursor, for jobs unique for a period among others."""
    args = _insert_args(job)
    conn = cur.connection
    # As in `_in_transaction`: a caller's transaction is joined, never committed here.
    async with conn.transaction() if conn.autocommit else contextlib.nullcontext():
        for _ in range(10):
            if job.unique_for is not None:
                await cur.execute(Q["job_unique_holder"], args)
                holder = await cur.fetchone()
                if holder is not None and holder["id"] is not None:
                    return JobInsertResult(holder["id"], created=False)
            unique = job.unique_for is not None
            await cur.execute(Q["job_insert_unique" if unique else "job_insert"], args)
            row = await cur.fetchone()
            if row is not None:
                return JobInsertResult(row["id"], created=True)
            if not unique:
                await cur.execute(Q["job_live_ids_by_key"], {"keys": [job.key]})
                existing = await cur.fetchone()
                if existing is not None:
                    return JobInsertResult(existing["id"], created=False)
    raise StoreUnavailable(f"could not settle the key {job.key!r}: it keeps changing hands")


def _insert_bulk(
    cur: psycopg.Cursor[dict[str, Any]], jobs: Sequence[JobInsertParams]
) -> list[JobInsertResult]:
    if goes_in_bulk(jobs):
        return all_created(_copy_rows(cur, jobs))
    ids, db_now = _reserve_ids(cur, len(jobs))
    run_ats = _run_ats(db_now, jobs)
    created = {
        row["id"] for row in cur.execute(Q["job_insert_many"], _unnest_args(ids, run_ats, jobs))
    }
    missing = _missing_keys(ids, created, jobs)
    live: dict[str, int] = {}
    if missing:
        rows = cur.execute(Q["job_live_ids_by_key"], {"keys": missing}).fetchall()
        live = {row["key"]: row["id"] for row in rows}
    return _results(ids, created, live, jobs)


def _run_ats(db_now: datetime, jobs: Sequence[JobInsertParams]) -> list[datetime]:
    return [job.run_at or db_now + timedelta(seconds=job.delay_seconds) for job in jobs]


def _reserve_ids(cur: psycopg.Cursor[dict[str, Any]], count: int) -> tuple[list[int], datetime]:
    row = _fetch(cur, Q["job_reserve_ids"], {"count": count})
    ids: list[int] = row["ids"]
    ids.sort()
    return ids, row["now"]


def _fetch(cur: psycopg.Cursor[dict[str, Any]], query: Any, args: Mapping[str, Any]) -> Any:
    """The one row of a statement that returns an array of ids. In binary, 100,000 ids arrive
    as integers, not as text to parse; but a caller's connection may make client-side cursors
    (Django's does), which can only read text."""
    binary = not isinstance(cur, psycopg.ClientCursor)
    row = cur.execute(query, args, binary=binary).fetchone()
    assert row is not None
    return row


# The wire types of job_copy_many's columns, in its order. A jsonb value in binary is a version
# byte (1) and the JSON text: jobs carry their payload already encoded, so it is sent as text
# behind that byte ("text" in binary is the UTF-8 bytes as they are) instead of being decoded for
# psycopg's jsonb dumper to encode again. psycopg's binary int4 dumper keeps the low 32 bits of a
# larger int without an error: priority and max_attempts reach here within their ranges, which
# `prepare` checks (tests/contract/test_insert.py stores both ends of each range).
COPY_TYPES = (
    "text", "text", "text", "int4", "timestamptz",
    "int4", "float8", "text", "float8", "text", "text",
)  # fmt: skip
JSONB_VERSION = "\x01"


def _copy_rows(cur: psycopg.Cursor[dict[str, Any]], jobs: Iterable[JobInsertParams]) -> list[int]:
    """COPY keyless jobs in and return their ids, in order. Each job is taken from `jobs` as it
    is sent: when `jobs` is made or validated lazily, that work runs while the server stores
    the rows already sent. An exception from `jobs` aborts the COPY, and the transaction with
    it (one of the caller's, or one opened here for a connection in autocommit mode)."""
    with _in_transaction(cur.connection):
        start = cur.execute(Q["job_copy_start"]).fetchone()
        assert start is not None
        db_now: datetime = start["now"]
        written = 0
        with cur.copy(Q["job_copy_many"]) as copy:
            copy.set_types(COPY_TYPES)
            for job in jobs:
                run_at = job.run_at or (
                    db_now + timedelta(seconds=job.delay_seconds) if job.delay_seconds else db_now
                )
                trace = job.trace_context
                copy.write_row(
                    (
                        job.queue,
                        job.task,
                        JSONB_VERSION + job.payload_json,
                        job.priority,
                        run_at,
                        job.max_attempts,
                        job.lease_seconds,
                        job.misfire,
                        job.misfire_grace,
                        job.rate_key,
                        None if trace is None else JSONB_VERSION + trace,
                    )
                )
                written += 1
        ids: list[int] = _fetch(cur, Q["job_copied_ids"], {"floor": start["floor"]})["ids"]
    if len(ids) != written:
        raise StoreError(f"a COPY of {written} jobs read back {len(ids)} ids")
    return ids


def _unnest_args(
    ids: list[int], run_ats: list[datetime], jobs: Sequence[JobInsertParams]
) -> dict[str, Any]:
    return {
        "ids": ids,
        "queues": [job.queue for job in jobs],
        "tasks": [job.task for job in jobs],
        "payloads": [job.payload_json for job in jobs],
        "priorities": [job.priority for job in jobs],
        "run_ats": run_ats,
        "max_attempts": [job.max_attempts for job in jobs],
        # float(): psycopg cannot send a list mixing int and float (`lease_seconds=60`).
        "lease_seconds": [float(job.lease_seconds) for job in jobs],
        "keys": [job.key for job in jobs],
        "misfires": [job.misfire for job in jobs],
        "misfire_graces": [job.misfire_grace for job in jobs],
        "rate_keys": [job.rate_key for job in jobs],
        "trace_contexts": [job.trace_context for job in jobs],
    }


def _missing_keys(ids: list[int], created: set[int], jobs: Sequence[JobInsertParams]) -> list[str]:
    return [
        job.key
        for job_id, job in zip(ids, jobs, strict=True)
        if job_id not in created and job.key is not None
    ]


def _results(
    ids: list[int], created: set[int], live: dict[str, int], jobs: Sequence[JobInsertParams]
) -> list[JobInsertResult]:
    results = []
    for job_id, job in zip(ids, jobs, strict=True):
        if job_id in created:
            results.append(JobInsertResult(job_id, created=True))
        elif job.key is not None and job.key in live:
            results.append(JobInsertResult(live[job.key], created=False))
        else:
            # The live job holding the key finished between the INSERT and the look-up; the
            # caller's enqueue is retried as a whole rather than returning a wrong id.
            raise StoreError(f"job with key {job.key!r} was neither inserted nor found; retry")
    return results
