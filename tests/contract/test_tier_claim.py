"""Contract: claiming staged jobs by id and lease token (tiered dispatch's confirmation)."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chronoq.core.jobs import MAX_ID, Job, JobStatus, Outcome
from chronoq.core.ratelimit import KeyLimit
from chronoq.storage.base import (
    IdClaim,
    JobClaimIdsParams,
    JobClaimParams,
    JobLeaseRef,
    JobStore,
    QueueLimitParams,
)
from chronoq.storage.postgres.store import PostgresStore

from .support import (
    DEADLINE,
    Store,
    caller_connection,
    claim_one,
    finish,
    get,
    insert,
    open_store,
    params,
)

PAST = datetime(2020, 1, 1, tzinfo=UTC)


def claim_ids(
    store: JobStore,
    refs: list[tuple[int, int]],
    *,
    worker_id: str = "w1",
    now: datetime | None = None,
    **settings: Any,
) -> IdClaim:
    pairs = [JobLeaseRef(job_id, token) for job_id, token in refs]
    return store.job_claim_ids(JobClaimIdsParams(pairs, worker_id, now, **settings))


def claimed_ids(result: IdClaim) -> list[int]:
    return [job.id for job in result.jobs]


def verdicts(result: IdClaim) -> dict[int, str]:
    """Each id's verdict; fails when an id has two."""
    named = [(job.id, "jobs") for job in result.jobs]
    named += [(job_id, "early") for job_id in result.early]
    named += [(job_id, "busy") for job_id in result.busy]
    named += [(job_id, "gone") for job_id in result.gone]
    counts = Counter(job_id for job_id, _ in named)
    assert all(count == 1 for count in counts.values()), named
    return dict(named)


# -- starting the attempt -------------------------------------------------------------------


def test_a_due_pending_job_with_its_token_is_started(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=42.5, run_at=PAST))
    now = store.db_now()
    result = claim_ids(store, [(job_id, 0)], worker_id="worker-7", now=now)
    [job] = result.jobs
    assert (job.id, job.status, job.attempts, job.lease_token) == (job_id, JobStatus.RUNNING, 1, 1)
    assert job.worker_id == "worker-7"
    assert job.started_at == now
    assert job.locked_until == now + timedelta(seconds=42.5)
    assert (result.early, result.busy, result.gone, result.db_now) == ({}, [], [], now)
    assert get(store, job_id) == job


def _started_fields(job: Job) -> dict[str, Any]:
    fields = dataclasses.asdict(job)
    for differs in ("id", "queue", "created_at"):
        del fields[differs]
    return fields


@pytest.mark.parametrize(
    ("task", "max_attempts", "expected"),
    [("mine", None, (3, 7.5)), ("other", None, (5, 60.0)), ("mine", 9, (9, 7.5))],
)
def test_the_attempt_starts_exactly_as_a_claim_starts_it(
    store: Store, task: str, max_attempts: int | None, expected: tuple[int, float]
) -> None:
    """Same task settings, same clock: a job claimed by id and its twin claimed by the database
    path end up alike in every column (the worker's task lease and attempts fill in what the
    job was enqueued without)."""
    settings: dict[str, Any] = {
        "leases": {"mine": 7.5},
        "max_attempts": {"mine": 3},
        "default_max_attempts": 5,
    }
    twins = [params(queue, task, run_at=PAST, max_attempts=max_attempts) for queue in "ab"]
    by_claim, by_id = insert(store, *twins)
    now = store.db_now()
    [claimed] = store.job_claim_with_wakeup(JobClaimParams(["a"], 1, "w9", now, **settings)).jobs
    [confirmed] = claim_ids(store, [(by_id, 0)], worker_id="w9", now=now, **settings).jobs
    assert claimed.id == by_claim
    assert _started_fields(confirmed) == _started_fields(claimed)
    assert (confirmed.max_attempts, confirmed.lease_seconds) == expected
    assert confirmed.locked_until == now + timedelta(seconds=expected[1])


def test_the_lease_runs_on_the_database_clock(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=30))
    before = store.db_now()
    result = claim_ids(store, [(job_id, 0)])
    after = store.db_now()
    [job] = result.jobs
    assert job.started_at is not None
    assert before <= job.started_at == result.db_now <= after
    assert job.locked_until == job.started_at + timedelta(seconds=30)


def test_a_retried_job_is_claimed_with_its_current_token_only(store: Store) -> None:
    [job_id] = insert(store)
    first = claim_one(store)
    assert finish(store, first, Outcome.RETRY, delay=0.0)
    assert get(store, job_id).lease_token == 1
    assert claim_ids(store, [(job_id, 0)]).gone == [job_id]
    [again] = claim_ids(store, [(job_id, 1)]).jobs
    assert (again.attempts, again.lease_token) == (2, 2)


def test_the_due_instant_itself_is_due(store: Store) -> None:
    due, later = insert(store, params(run_at=PAST), params(run_at=PAST + timedelta(microseconds=1)))
    result = claim_ids(store, [(due, 0), (later, 0)], now=PAST)
    assert claimed_ids(result) == [due]
    assert result.early == {later: PAST + timedelta(microseconds=1)}


# -- what is not started --------------------------------------------------------------------


def test_a_job_not_yet_due_is_early_and_left_alone(store: Store) -> None:
    [job_id] = insert(store, params(delay_seconds=3600))
    before = get(store, job_id)
    result = claim_ids(store, [(job_id, 0)])
    assert (result.jobs, result.busy, result.gone) == ([], [], [])
    assert result.early == {job_id: before.run_at}
    assert get(store, job_id) == before


def test_jobs_with_nothing_to_run_are_gone(store: Store) -> None:
    wrong_token, running, done, cancelled = insert(store, *[params() for _ in range(4)])
    [paused] = insert(store, params("paused"))
    [rated, capped, keyed] = insert(store, params("rated"), params("capped"), params("keyed"))
    store.queue_pause("paused", True)
    store.queue_limit(QueueLimitParams("rated", rate=5.0, burst=1.0))
    store.queue_limit(QueueLimitParams("capped", concurrency=4))
    store.key_limit_set("keyed", KeyLimit("host:*", 1.0, 1.0))
    claimed = claim_one(store)  # the oldest: `wrong_token`, now running with token 1
    assert claimed.id == wrong_token
    assert finish(store, claimed, Outcome.RETRY, delay=0.0)  # pending again, token 1
    assert claim_one(store).id == running  # token 1, running
    assert finish(store, claim_one(store), Outcome.DONE)  # `done`
    store.job_cancel(cancelled)
    missing = cancelled + 1000
    untouched = {job_id: get(store, job_id) for job_id in range(1, keyed + 1)}
    refs = [(job_id, 0) for job_id in (wrong_token, done, cancelled, paused, rated, capped, keyed)]
    refs += [(running, 1), (missing, 0)]
    result = claim_ids(store, refs)
    assert result.gone == sorted(job_id for job_id, _ in refs)
    assert (result.jobs, result.early, result.busy) == ([], {}, [])
    assert {job_id: get(store, job_id) for job_id in untouched} == untouched


@pytest.mark.parametrize("job_id", [0, -1, MAX_ID, MAX_ID + 1, 2**80])
def test_ids_no_job_can_have_are_gone(store: Store, job_id: int) -> None:
    [real] = insert(store)
    result = claim_ids(store, [(job_id, 0), (real, 0), (real, 2**80)])
    assert (claimed_ids(result), result.gone) == ([real], [job_id])


def test_a_skip_misfire_past_its_grace_is_skipped_and_gone(store: Store) -> None:
    late, in_time = insert(
        store,
        params(run_at=PAST, misfire="skip", misfire_grace=10.0),
        params(run_at=PAST, misfire="skip", misfire_grace=10.0),
    )
    at = PAST + timedelta(seconds=10)
    assert claimed_ids(claim_ids(store, [(in_time, 0)], now=at)) == [in_time]
    result = claim_ids(store, [(late, 0)], now=at + timedelta(microseconds=1))
    assert (result.jobs, result.gone) == ([], [late])
    skipped = get(store, late)
    assert (skipped.status, skipped.attempts) == (JobStatus.SKIPPED, 0)
    assert skipped.finished_at == at + timedelta(microseconds=1)


def test_an_id_given_twice_has_one_verdict(store: Store) -> None:
    twice, either, neither = insert(store, *[params() for _ in range(3)])
    refs = [(twice, 0), (twice, 0), (either, 5), (either, 0), (neither, 5), (neither, 6)]
    result = claim_ids(store, refs)
    assert verdicts(result) == {twice: "jobs", either: "jobs", neither: "gone"}
    assert [job.attempts for job in result.jobs] == [1, 1]


def test_every_id_gets_exactly_one_verdict(store: Store) -> None:
    due = insert(store, *[params() for _ in range(5)])
    early = insert(store, *[params(delay_seconds=600) for _ in range(3)])
    stale = insert(store, *[params() for _ in range(2)])
    refs = [(job_id, 0) for job_id in due + early] + [(job_id, 7) for job_id in stale]
    refs.append((10_000, 0))
    result = claim_ids(store, list(reversed(refs)))
    assert verdicts(result) == (
        dict.fromkeys(due, "jobs")
        | dict.fromkeys(early, "early")
        | dict.fromkeys([*stale, 10_000], "gone")
    )
    assert claimed_ids(result) == due  # in id order, whatever order they were given in


def test_no_refs_claim_nothing_and_read_the_clock(store: Store) -> None:
    insert(store)
    result = claim_ids(store, [], now=PAST)
    assert result == IdClaim([], {}, [], [], PAST)


# -- PostgreSQL: rows locked by others ----------------------------------------------------


def test_a_row_locked_by_another_transaction_is_busy(pg_store: PostgresStore) -> None:
    store = pg_store
    locked, free = insert(store, params(), params())
    with caller_connection(store) as conn:
        conn.execute("SELECT id FROM chronoq_jobs WHERE id = %s FOR UPDATE", [locked])
        result = claim_ids(store, [(locked, 0), (free, 0)])
        assert (claimed_ids(result), result.busy, result.gone) == ([free], [locked], [])
        conn.rollback()
    assert claimed_ids(claim_ids(store, [(locked, 0)])) == [locked]


def test_a_locked_row_that_is_not_due_is_early_not_busy(pg_store: PostgresStore) -> None:
    store = pg_store
    [job_id] = insert(store, params(delay_seconds=600))
    with caller_connection(store) as conn:
        conn.execute("SELECT id FROM chronoq_jobs WHERE id = %s FOR UPDATE", [job_id])
        assert list(claim_ids(store, [(job_id, 0)]).early) == [job_id]
        conn.rollback()


ROUNDS = 300
BATCH = 12


def test_workers_confirming_overlapping_batches_in_opposite_orders(
    pg_store: PostgresStore,
) -> None:
    """Two workers confirm the same entries (a redelivery), one in ascending, one in descending
    order, many times: neither waits for nor deadlocks with the other, and each job is started
    once."""
    store = pg_store
    jobs = (params() for _ in range(ROUNDS * BATCH))
    ids = [result.id for result in store.job_insert_stream(jobs)]
    batches = [ids[r * BATCH : (r + 1) * BATCH] for r in range(ROUNDS)]
    start = threading.Barrier(2, timeout=DEADLINE)
    results: list[list[tuple[list[int], IdClaim]]] = [[], []]
    errors: list[BaseException] = []

    def confirm(worker: int) -> None:
        own = open_store(store)
        try:
            for batch in batches:
                # Each overlaps the other in all but two ids, from opposite ends.
                mine = batch[2:] if worker else list(reversed(batch[:-2]))
                start.wait()
                refs = [(job_id, 0) for job_id in mine]
                results[worker].append((mine, claim_ids(own, refs, worker_id=f"w{worker}")))
        except BaseException as exc:
            errors.append(exc)
            start.abort()
        finally:
            own.close()

    threads = [threading.Thread(target=confirm, args=(n,), daemon=True) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE * 2)
        assert not thread.is_alive(), "a worker did not finish in time"
    assert errors == []
    started = Counter(job.id for side in results for _, result in side for job in result.jobs)
    assert sorted(started) == ids
    assert set(started.values()) == {1}
    for side in results:
        for mine, result in side:
            # What one worker did not start, the other did: busy or gone here, never early.
            assert set(verdicts(result)) == set(mine)
            assert result.early == {}
