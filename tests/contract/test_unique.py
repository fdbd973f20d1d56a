"""Contract: keys unique for a period (`unique_for`). Within the period of the enqueue of the job
that took a key, enqueuing the key returns that job, finished, dead or pruned; after it, the key
is free again (unless a live job holds it, as always). Race-free across threads and processes.
"""

from __future__ import annotations

import multiprocessing
import threading
from datetime import timedelta
from typing import Any

import pytest

from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import (
    JobClaimParams,
    JobInsertParams,
    JobInsertResult,
    JobPruneParams,
)
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore

from .support import (
    DEADLINE,
    Store,
    caller_connection,
    claim_one,
    finish,
    get,
    open_store,
    params,
    run_together,
)

HOUR = 3600.0


def unique(key: str = "k", period: float = HOUR, **options: Any) -> JobInsertParams:
    return params(key=key, unique_for=period, **options)


def enqueue(store: Store, job: JobInsertParams) -> JobInsertResult:
    [result] = store.job_insert_many([job])
    return result


def run_to_the_end(store: Store, job_id: int, outcome: Outcome = Outcome.DONE) -> None:
    claimed = claim_one(store)
    assert claimed.id == job_id
    assert finish(store, claimed, outcome)


def age_the_key(store: Store, key: str, seconds: float) -> None:
    """Move the key's record `seconds` into the past, as if that much time had gone by."""
    with caller_connection(store) as conn:
        if isinstance(store, SqliteStore):
            micros = int(seconds * 1_000_000)
            conn.execute(
                "UPDATE chronoq_unique_keys SET enqueued_at = enqueued_at - ?, "
                "keep_until = keep_until - ? WHERE key = ?",
                (micros, micros, key),
            )
        else:
            conn.execute(
                "UPDATE chronoq_unique_keys SET enqueued_at = enqueued_at - %s * interval '1s', "
                "keep_until = keep_until - %s * interval '1s' WHERE key = %s",
                (seconds, seconds, key),
            )
        conn.commit()


def records(store: Store) -> list[tuple[Any, ...]]:
    with caller_connection(store) as conn:
        rows = conn.execute("SELECT key, job_id FROM chronoq_unique_keys ORDER BY key").fetchall()
    return [tuple(row) for row in rows]


def test_within_the_period_a_finished_job_is_returned(store: Store) -> None:
    first = enqueue(store, unique(payload={"n": 1}))
    assert first.created
    run_to_the_end(store, first.id)
    again = enqueue(store, unique(payload={"n": 2}))
    assert again == JobInsertResult(first.id, created=False)
    assert get(store, first.id).status is JobStatus.DONE


@pytest.mark.parametrize("outcome", [Outcome.DEAD, Outcome.CANCELLED])
def test_any_end_of_the_job_keeps_the_key_taken(store: Store, outcome: Outcome) -> None:
    first = enqueue(store, unique())
    run_to_the_end(store, first.id, outcome)
    assert enqueue(store, unique()) == JobInsertResult(first.id, created=False)


def test_a_pending_job_is_returned_as_today(store: Store) -> None:
    first = enqueue(store, unique())
    assert enqueue(store, unique()) == JobInsertResult(first.id, created=False)


def test_after_the_period_the_key_is_free_again(store: Store) -> None:
    first = enqueue(store, unique())
    run_to_the_end(store, first.id)
    age_the_key(store, "k", HOUR + 1)
    second = enqueue(store, unique())
    assert second.created and second.id != first.id
    # The new job took the key, for a period of its own.
    assert enqueue(store, unique()) == JobInsertResult(second.id, created=False)
    assert records(store) == [("k", second.id)]


def test_the_period_is_counted_from_the_first_enqueue(store: Store) -> None:
    first = enqueue(store, unique())
    run_to_the_end(store, first.id)
    age_the_key(store, "k", HOUR - 60)  # one minute left: still taken
    assert enqueue(store, unique()) == JobInsertResult(first.id, created=False)
    age_the_key(store, "k", 120)  # the second enqueue did not restart the period
    assert enqueue(store, unique()).created


def test_the_period_asked_by_each_enqueue_decides(store: Store) -> None:
    first = enqueue(store, unique(period=HOUR))
    run_to_the_end(store, first.id)
    age_the_key(store, "k", 2 * HOUR)
    # Two hours after the first enqueue: taken for a day, free for an hour.
    assert enqueue(store, unique(period=24 * HOUR)) == JobInsertResult(first.id, created=False)
    assert enqueue(store, unique(period=HOUR)).created


def test_a_pruned_job_still_holds_its_key_for_the_period(store: Store) -> None:
    first = enqueue(store, unique())
    run_to_the_end(store, first.id)
    assert store.job_prune(JobPruneParams(older_than=timedelta(0))) == 1
    assert store.job_get(first.id) is None
    assert enqueue(store, unique()) == JobInsertResult(first.id, created=False)
    assert records(store) == [("k", first.id)]


def test_the_pruner_drops_records_once_their_period_has_passed(store: Store) -> None:
    kept = enqueue(store, unique(key="kept"))
    gone = enqueue(store, unique(key="gone"))
    age_the_key(store, "gone", HOUR + 1)
    store.job_prune(JobPruneParams(older_than=timedelta(days=1)))
    assert records(store) == [("kept", kept.id)]
    assert get(store, gone.id).status is JobStatus.PENDING  # the job itself is not touched


def test_a_live_job_without_a_period_is_taken_from_its_own_enqueue(store: Store) -> None:
    [live] = store.job_insert_many([params(key="k")])
    assert enqueue(store, unique()) == JobInsertResult(live.id, created=False)
    run_to_the_end(store, live.id)
    assert enqueue(store, unique()) == JobInsertResult(live.id, created=False)


def test_an_enqueue_without_a_period_keeps_the_live_rule(store: Store) -> None:
    first = enqueue(store, unique())
    run_to_the_end(store, first.id)
    [plain] = store.job_insert_many([params(key="k")])
    assert plain.created and plain.id != first.id


def test_keys_unique_for_a_period_in_one_bulk_call(store: Store) -> None:
    results = store.job_insert_many(
        [unique(key="a"), params(), unique(key="b"), unique(key="a"), params(key="b")]
    )
    a, plain, b, a_again, b_plain = results
    assert a.created and plain.created and b.created
    assert a_again == JobInsertResult(a.id, created=False)
    assert b_plain == JobInsertResult(b.id, created=False)


def test_a_rolled_back_enqueue_does_not_take_the_key(store: Store) -> None:
    with caller_connection(store) as conn:
        [inside] = store.job_insert_many([unique()], conn=conn)
        assert inside.created
        conn.rollback()
    assert records(store) == []
    created = enqueue(store, unique())
    assert created.created
    assert records(store) == [("k", created.id)]


@pytest.mark.timeout(60)
def test_concurrent_threads_enqueue_one_job(store: Store) -> None:
    results = run_together(store, 8, lambda own, n: enqueue(own, unique(payload={"n": n})))
    assert len({result.id for result in results}) == 1
    assert sum(result.created for result in results) == 1


@pytest.mark.timeout(60)
def test_batches_taking_the_same_keys_in_opposite_orders_do_not_deadlock(store: Store) -> None:
    keys = [f"k{n}" for n in range(10)]

    def enqueue_batches(own: Store, n: int) -> list[list[JobInsertResult]]:
        batches = []
        for round_ in range(15):
            ordered = keys if n % 2 == 0 else keys[::-1]
            batch = [unique(key=f"{round_}-{key}", payload={"thread": n}) for key in ordered]
            results = own.job_insert_many(batch)
            batches.append(results if n % 2 == 0 else results[::-1])
        return batches

    per_thread = run_together(store, 4, enqueue_batches)
    for round_ in range(15):
        for position in range(len(keys)):
            answers = [batches[round_][position] for batches in per_thread]
            assert len({result.id for result in answers}) == 1
            assert sum(result.created for result in answers) == 1
    assert sum(stat.count for stat in store.stats()) == 15 * len(keys)


# -- several processes, each with several threads -------------------------------------------

PROCESSES = 3
THREADS = 4
KEYS = [f"shared-{n}" for n in range(20)]


def _open(kind: str, dsn: str) -> Store:
    return SqliteStore(dsn) if kind == "sqlite" else PostgresStore(dsn, pool_size=1)


def _enqueue_in_process(kind: str, dsn: str, ready: Any, start: Any, results: Any) -> None:
    """Entry point of one enqueuing process: `THREADS` threads, each with a store of its own,
    wait for `start`, then enqueue each of `KEYS` in turn; what each got goes to `results`."""
    stores = [_open(kind, dsn) for _ in range(THREADS)]
    found: list[Any] = []

    def run(own: Store) -> None:
        start.wait(DEADLINE)
        for key in KEYS:
            try:
                result = enqueue(own, unique(key=key, period=60.0))
                found.append((key, result.id, result.created))
            except Exception as exc:
                found.append((key, "error", repr(exc)))

    threads = [threading.Thread(target=run, args=(own,)) for own in stores]
    for thread in threads:
        thread.start()
    ready.put(True)
    for thread in threads:
        thread.join(DEADLINE)
    for own in stores:
        own.close()
    results.put(found)


def _finish_jobs_until(store: Store, stop: threading.Event) -> None:
    """Run every job to its end as soon as it is enqueued: a finished job no longer holds its
    key among live jobs, so only the period's record keeps a second enqueue from creating one."""
    while not stop.is_set():
        for job in store.job_claim_with_wakeup(JobClaimParams(["q"], 50, "finisher")).jobs:
            finish(store, job, Outcome.DONE)


@pytest.mark.timeout(120)
def test_concurrent_processes_and_threads_enqueue_one_job_per_key(store: Store) -> None:
    kind = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    dsn = store.dsn_display if isinstance(store, SqliteStore) else store.dsn
    spawn = multiprocessing.get_context("spawn")
    ready, results, start = spawn.Queue(), spawn.Queue(), spawn.Event()
    processes = [
        spawn.Process(target=_enqueue_in_process, args=(kind, dsn, ready, start, results))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    stop = threading.Event()
    finisher = threading.Thread(target=_finish_jobs_until, args=(open_store(store), stop))
    try:
        for _ in processes:
            ready.get(timeout=DEADLINE)
        finisher.start()
        start.set()  # every thread of every process is waiting on it: they go together
        found = [item for _ in processes for item in results.get(timeout=DEADLINE)]
    finally:
        stop.set()
        for process in processes:
            process.join(DEADLINE)
        if finisher.is_alive():
            finisher.join(DEADLINE)
    assert len(found) == PROCESSES * THREADS * len(KEYS)
    assert all(job_id != "error" for _, job_id, _ in found), found
    for key in KEYS:
        answers = [(job_id, created) for k, job_id, created in found if k == key]
        assert len({job_id for job_id, _ in answers}) == 1, (key, answers)
        assert sum(created for _, created in answers) == 1, (key, answers)
    assert sum(stat.count for stat in store.stats()) == len(KEYS)
