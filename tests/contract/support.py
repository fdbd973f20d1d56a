"""Helpers shared by the store contract suite.

Everything here speaks only the `JobStore` port, except `open_store` and `caller_connection`,
which need to know which adapter a store is in order to open a second store or a plain driver
connection on the same database.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg

from chronoq.core.jobs import Job, Outcome
from chronoq.storage.base import (
    JobClaimParams,
    JobFinishParams,
    JobInsertParams,
    JobLeaseRef,
    JobStore,
)
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore

Store = SqliteStore | PostgresStore
T = TypeVar("T")
DEADLINE = 30.0  # seconds any wait in this suite may take before the test fails


def params(
    queue: str = "q",
    task: str = "t",
    payload: dict[str, Any] | None = None,
    **options: Any,
) -> JobInsertParams:
    """A job to insert; `options` are the other `JobInsertParams` fields."""
    text = json.dumps(payload or {}, ensure_ascii=False)
    return JobInsertParams(queue=queue, task=task, payload_json=text, **options)


def insert(store: JobStore, *jobs: JobInsertParams) -> list[int]:
    """Insert jobs that must all be created; return their ids in input order."""
    results = store.job_insert_many(list(jobs or [params()]))
    assert all(result.created for result in results)
    return [result.id for result in results]


def claim(
    store: JobStore,
    queues: Sequence[str] = ("q",),
    limit: int = 100,
    worker_id: str = "w1",
    now: datetime | None = None,
) -> list[Job]:
    return store.job_claim_with_wakeup(JobClaimParams(list(queues), limit, worker_id, now)).jobs


def claim_one(store: JobStore, **kwargs: Any) -> Job:
    jobs = claim(store, limit=1, **kwargs)
    assert len(jobs) == 1, jobs
    return jobs[0]


def ref(job: Job) -> JobLeaseRef:
    return JobLeaseRef(job.id, job.lease_token)


def finish(
    store: JobStore,
    job: Job,
    outcome: Outcome,
    *,
    delay: float = 0.0,
    error: dict[str, Any] | None = None,
    token: int | None = None,
) -> bool:
    """Report one attempt; True when the store accepted it (the token still matched)."""
    token = job.lease_token if token is None else token
    accepted = store.job_finish_many([JobFinishParams(job.id, token, outcome, delay, error)])
    assert accepted <= {job.id}
    return job.id in accepted


def get(store: JobStore, job_id: int) -> Job:
    job = store.job_get(job_id)
    assert job is not None, f"job {job_id} is missing"
    return job


def make_dead(store: JobStore, job: JobInsertParams, *, message: str = "boom") -> Job:
    """Insert a job and take it to `dead` through a claim and a failed attempt."""
    [job_id] = insert(store, job)
    claimed = claim_one(store, queues=[job.queue])
    assert claimed.id == job_id
    error = {"attempt": claimed.attempts, "error": "ValueError", "message": message}
    assert finish(store, claimed, Outcome.DEAD, error=error)
    return get(store, job_id)


def open_store(store: Store) -> Store:
    """A second, independent store on the same database as `store`."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.dsn_display)
    return PostgresStore(store.dsn, pool_size=1)


@contextmanager
def caller_connection(store: Store) -> Iterator[Any]:
    """A plain driver connection on the store's database, as an application would hold one.

    Both drivers open a transaction implicitly at the first statement; the caller ends it with
    `commit()` or `rollback()`.
    """
    conn: Any
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path, timeout=DEADLINE)
    else:
        conn = psycopg.connect(store.dsn)
    try:
        yield conn
    finally:
        conn.close()


def iso(moment: str) -> datetime:
    """A time from a job's error history (ISO 8601 with an offset)."""
    parsed = datetime.fromisoformat(moment)
    assert parsed.utcoffset() == timedelta(0), moment
    return parsed


def claim_until_empty(store: JobStore, worker_id: str, limit: int) -> list[int]:
    """Claim batches until the store has nothing left; return every id claimed, in order."""
    claimed: list[int] = []
    while batch := claim(store, limit=limit, worker_id=worker_id):
        claimed.extend(job.id for job in batch)
    return claimed


def process_claimer(dsn: str, worker_id: str, limit: int, start: Any, results: Any) -> None:
    """Entry point of a separate claiming process (multiprocessing, spawn)."""
    store = SqliteStore(dsn)
    try:
        start.wait(DEADLINE)
        results.put((worker_id, claim_until_empty(store, worker_id, limit)))
    finally:
        store.close()


def run_together(store: Store, threads: int, work: Callable[[Store, int], T]) -> list[T]:
    """Run `work(own_store, n)` on `threads` threads at once, each with a store of its own,
    released together by a barrier; return the results in thread order, or raise the first
    error any thread met."""
    start = threading.Barrier(threads, timeout=DEADLINE)
    results: list[Any] = [None] * threads
    errors: list[BaseException] = []

    def run(n: int) -> None:
        own = open_store(store)
        try:
            start.wait()
            results[n] = work(own, n)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    workers = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(DEADLINE)
        assert not worker.is_alive(), "a thread did not finish in time"
    if errors:
        raise errors[0]
    return results
