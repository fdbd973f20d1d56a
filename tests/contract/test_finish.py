"""Contract: how attempts end, leases, the rescuer, and fencing by the lease token."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import (
    JobFinishParams,
    JobHeartbeatResult,
    JobInsertResult,
    JobLeaseRef,
    JobRescueParams,
)
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.rows import MAX_RETRY_DELAY

from .support import (
    Store,
    caller_connection,
    claim,
    claim_one,
    finish,
    get,
    insert,
    iso,
    params,
    ref,
)

PAST = datetime(2020, 1, 1, tzinfo=UTC)
ERROR = {"attempt": 1, "error": "ValueError", "message": "bad 'input' <b>", "traceback": "..."}


@pytest.mark.parametrize("outcome", [Outcome.DONE, Outcome.DEAD, Outcome.CANCELLED])
def test_final_outcomes(store: Store, outcome: Outcome) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    before = store.db_now()
    assert finish(store, job, outcome)
    after = store.db_now()
    stored = get(store, job_id)
    assert stored.status == JobStatus(str(outcome))
    assert stored.finished_at is not None
    assert before <= stored.finished_at <= after
    assert stored.locked_until is None
    assert (stored.attempts, stored.lease_token, stored.errors) == (1, 1, [])
    assert stored.run_at == job.run_at


def test_retry_goes_back_to_pending_after_the_delay(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    before = store.db_now()
    assert finish(store, job, Outcome.RETRY, delay=90.25, error=ERROR)
    after = store.db_now()

    stored = get(store, job_id)
    assert stored.status is JobStatus.PENDING
    assert before + timedelta(seconds=90.25) <= stored.run_at <= after + timedelta(seconds=90.25)
    assert stored.locked_until is None
    assert stored.finished_at is None
    assert stored.attempts == 1
    [entry] = stored.errors
    assert {k: entry[k] for k in ERROR} == ERROR
    assert iso(entry["started_at"]) == job.started_at
    assert before <= iso(entry["finished_at"]) <= after
    assert claim(store) == []
    assert claim_one(store, now=after + timedelta(seconds=91)).attempts == 2


@pytest.mark.parametrize(
    ("delay", "expected"),
    [
        (math.inf, MAX_RETRY_DELAY),
        (1e15, MAX_RETRY_DELAY),
        (math.nan, 0.0),
        (-5.0, 0.0),
    ],
)
def test_an_unusable_retry_delay_is_clamped_not_fatal(
    store: Store, delay: float, expected: float
) -> None:
    """One job asking for an impossible delay must not fail the batch it is reported in."""
    ids = insert(store, params(), params())
    first, second = claim(store, limit=2)
    before = store.db_now()
    batch = [
        JobFinishParams(first.id, first.lease_token, Outcome.RETRY, delay, ERROR),
        JobFinishParams(second.id, second.lease_token, Outcome.DONE),
    ]
    assert store.job_finish_many(batch) == set(ids)
    after = store.db_now()
    retried = get(store, first.id)
    assert retried.status is JobStatus.PENDING
    window = timedelta(seconds=expected)
    assert before + window <= retried.run_at <= after + window
    assert get(store, second.id).status is JobStatus.DONE


def test_errors_accumulate_in_order_with_their_attempt(store: Store) -> None:
    [job_id] = insert(store)
    for attempt in (1, 2):
        job = claim_one(store)
        assert finish(store, job, Outcome.RETRY, error={"error": "E", "message": str(attempt)})
    job = claim_one(store)
    assert finish(store, job, Outcome.DEAD, error={"error": "E", "message": "3"})
    stored = get(store, job_id)
    assert stored.status is JobStatus.DEAD
    assert [(e["attempt"], e["message"]) for e in stored.errors] == [(1, "1"), (2, "2"), (3, "3")]
    started = [iso(e["started_at"]) for e in stored.errors]
    assert started == sorted(started)
    assert iso(stored.errors[-1]["finished_at"]) == stored.finished_at


def test_finish_many_in_one_batch(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(4)])
    jobs = claim(store, limit=4)
    outcomes = [Outcome.DONE, Outcome.RETRY, Outcome.DEAD, Outcome.CANCELLED]
    batch = [JobFinishParams(j.id, j.lease_token, o) for j, o in zip(jobs, outcomes, strict=True)]
    assert store.job_finish_many(batch) == set(ids)
    statuses = [get(store, job.id).status for job in jobs]
    assert statuses == ["done", "pending", "dead", "cancelled"]
    assert store.job_finish_many([]) == set()


def test_a_stale_token_is_rejected_and_changes_nothing(store: Store) -> None:
    insert(store, params(), params())
    first, second = claim(store, limit=2)
    before = get(store, first.id)
    batch = [
        JobFinishParams(first.id, first.lease_token + 1, Outcome.DONE),
        JobFinishParams(first.id, first.lease_token - 1, Outcome.DEAD, error=ERROR),
        JobFinishParams(second.id, second.lease_token, Outcome.DONE),
        JobFinishParams(999_999, 1, Outcome.DONE),
    ]
    assert store.job_finish_many(batch) == {second.id}
    # Only the write with an older token is a fencing rejection: nobody was ever handed the
    # newer one, so it says nothing about a worker that lost the job.
    assert get(store, first.id) == dataclasses.replace(before, fence_rejections=1)


def test_a_batch_of_successes_is_fenced_like_any_other(store: Store) -> None:
    """Every result done and without an error: the store's shorter path for the common batch
    refuses exactly what the general one does, and leaves a job cancelled while it ran alone."""
    insert(store, params(), params(), params())
    stale, fresh, cancelled = claim(store, limit=3)
    before = get(store, stale.id)
    store.job_cancel(cancelled.id)
    cancelled_before = get(store, cancelled.id)
    batch = [
        JobFinishParams(stale.id, stale.lease_token - 1, Outcome.DONE),
        JobFinishParams(stale.id, stale.lease_token + 1, Outcome.DONE),
        JobFinishParams(fresh.id, fresh.lease_token, Outcome.DONE),
        JobFinishParams(cancelled.id, cancelled.lease_token, Outcome.DONE),
        JobFinishParams(999_999, 1, Outcome.DONE),
    ]
    assert store.job_finish_many(batch) == {fresh.id}
    assert get(store, stale.id) == dataclasses.replace(before, fence_rejections=1)
    assert get(store, fresh.id).status == JobStatus.DONE
    assert get(store, cancelled.id).status == JobStatus.CANCELLED
    assert get(store, cancelled.id).finished_at == cancelled_before.finished_at


@pytest.mark.parametrize("outcome", [Outcome.DONE, Outcome.RETRY, Outcome.DEAD])
def test_a_job_no_longer_running_cannot_be_finished_again(store: Store, outcome: Outcome) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert finish(store, job, outcome, delay=3600)
    after_first = get(store, job_id)
    for second in Outcome:
        assert not finish(store, job, second, error=ERROR)
    assert get(store, job_id) == after_first


def test_a_pending_job_cannot_be_finished(store: Store) -> None:
    [job_id] = insert(store)
    before = get(store, job_id)
    assert store.job_finish_many([JobFinishParams(job_id, 0, Outcome.DONE)]) == set()
    assert get(store, job_id) == before


# -- heartbeat and release ------------------------------------------------------------------


def test_heartbeat_extends_the_lease_on_the_database_clock(store: Store) -> None:
    insert(store, params(run_at=PAST, lease_seconds=30))
    job = claim_one(store, now=PAST + timedelta(seconds=1))
    assert job.locked_until == PAST + timedelta(seconds=31)
    before = store.db_now()
    assert store.job_heartbeat_many([ref(job)]) == JobHeartbeatResult(renewed={job.id})
    after = store.db_now()
    locked_until = get(store, job.id).locked_until
    assert locked_until is not None
    assert before + timedelta(seconds=30) <= locked_until <= after + timedelta(seconds=30)
    assert store.job_heartbeat_many([]) == JobHeartbeatResult()


def test_heartbeat_is_fenced(store: Store) -> None:
    insert(store, params(), params())
    first, second = claim(store, limit=2)
    assert finish(store, second, Outcome.DONE)
    before = [get(store, first.id), get(store, second.id)]
    stale = [JobLeaseRef(first.id, first.lease_token + 1), ref(second), JobLeaseRef(12345, 1)]
    assert store.job_heartbeat_many(stale) == JobHeartbeatResult()
    assert [get(store, first.id), get(store, second.id)] == before


def test_release_gives_the_attempt_back(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert store.job_release_many([ref(job)]) == {job_id}
    stored = get(store, job_id)
    assert stored.status is JobStatus.PENDING
    assert (stored.attempts, stored.lease_token) == (0, 1)
    assert (stored.locked_until, stored.started_at) == (None, None)
    assert stored.worker_id is None
    again = claim_one(store)
    assert (again.id, again.attempts, again.lease_token) == (job_id, 1, 2)
    assert store.job_release_many([]) == set()


def test_release_is_fenced(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    before = get(store, job_id)
    assert store.job_release_many([JobLeaseRef(job_id, job.lease_token + 1)]) == set()
    assert get(store, job_id) == before
    assert store.job_release_many([ref(job)]) == {job_id}
    released = get(store, job_id)
    assert store.job_release_many([ref(job)]) == set()  # no longer running
    assert get(store, job_id) == released


# -- the rescuer ----------------------------------------------------------------------------


def test_rescue_requeues_expired_leases(store: Store) -> None:
    expired_id, fresh_id = insert(store, params(lease_seconds=10), params(lease_seconds=100))
    now = store.db_now()
    expired, fresh = claim(store, limit=2, worker_id="w-dead", now=now)
    assert (expired.id, fresh.id) == (expired_id, fresh_id)

    assert store.job_rescue_expired(JobRescueParams(now=now + timedelta(seconds=10))).requeued == []
    later = now + timedelta(seconds=11)
    result = store.job_rescue_expired(JobRescueParams(now=later))
    assert (result.requeued, result.dead) == ([expired_id], [])

    stored = get(store, expired_id)
    assert stored.status is JobStatus.PENDING
    assert stored.run_at == expired.run_at  # its place in line, ahead of jobs due since
    assert (stored.locked_until, stored.finished_at) == (None, None)
    assert stored.worker_id is None
    assert (stored.attempts, stored.lease_token) == (1, 1)
    [entry] = stored.errors
    assert (entry["error"], entry["attempt"], entry["outcome"]) == ("LeaseExpired", 1, "retry")
    assert entry["worker"] == "w-dead"
    assert "w-dead" in entry["message"]
    assert iso(entry["started_at"]) == now
    assert iso(entry["finished_at"]) == later
    assert get(store, fresh_id).status is JobStatus.RUNNING


def test_a_rescued_skip_job_gets_a_fresh_grace(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=10, misfire="skip", misfire_grace=5.0))
    now = store.db_now()
    claim(store, worker_id="w-dead", now=now)
    later = now + timedelta(seconds=60)
    assert store.job_rescue_expired(JobRescueParams(now=later)).requeued == [job_id]
    assert get(store, job_id).run_at == later
    assert [job.id for job in claim(store, now=later + timedelta(seconds=1))] == [job_id]


def test_rescue_kills_a_job_on_its_last_attempt(store: Store) -> None:
    [job_id] = insert(store, params(max_attempts=1, lease_seconds=5))
    now = store.db_now()
    claim_one(store, now=now)
    later = now + timedelta(minutes=1)
    result = store.job_rescue_expired(JobRescueParams(now=later))
    assert (result.requeued, result.dead) == ([], [job_id])
    stored = get(store, job_id)
    assert stored.status is JobStatus.DEAD
    assert stored.finished_at == later
    assert [(e["error"], e["outcome"]) for e in stored.errors] == [("LeaseExpired", "dead")]


def test_rescue_honours_its_limit_oldest_lease_first(store: Store) -> None:
    ids = insert(store, *[params(lease_seconds=10 + i) for i in range(5)])
    now = store.db_now()
    claim(store, limit=5, now=now)
    later = now + timedelta(hours=1)
    first = store.job_rescue_expired(JobRescueParams(limit=2, now=later))
    assert sorted(first.requeued) == ids[:2]
    rest = store.job_rescue_expired(JobRescueParams(limit=10, now=later))
    assert sorted(rest.requeued) == ids[2:]


def test_rescue_on_the_database_clock_leaves_live_leases_alone(store: Store) -> None:
    insert(store, params(lease_seconds=3600))
    job = claim_one(store)
    result = store.job_rescue_expired(JobRescueParams())
    assert (result.requeued, result.dead) == ([], [])
    assert get(store, job.id) == job


def test_fencing_end_to_end_after_a_rescue(store: Store) -> None:
    """The old owner of a rescued and re-claimed job can neither finish nor extend it."""
    [job_id] = insert(store, params(lease_seconds=5))
    now = store.db_now()
    old = claim_one(store, worker_id="old", now=now)
    later = now + timedelta(seconds=6)
    assert store.job_rescue_expired(JobRescueParams(now=later)).requeued == [job_id]

    # Between the rescue and the new claim the old owner is already locked out.
    assert not finish(store, old, Outcome.DONE)
    assert store.job_heartbeat_many([ref(old)]) == JobHeartbeatResult()

    new = claim_one(store, worker_id="new", now=later)
    assert (new.id, new.attempts) == (job_id, 2)
    assert new.lease_token > old.lease_token
    owned = get(store, job_id)
    assert not finish(store, old, Outcome.DONE)
    assert not finish(store, old, Outcome.RETRY, error=ERROR)
    assert store.job_heartbeat_many([ref(old)]) == JobHeartbeatResult()
    assert store.job_release_many([ref(old)]) == set()
    # Each refused write is counted on the job; the ones before the new claim named the token
    # the job still had (it was pending, nobody held it), so they are not fencing rejections.
    assert get(store, job_id) == dataclasses.replace(owned, fence_rejections=4)
    with caller_connection(store) as conn:
        assert not store.job_complete_in(conn, ref(old))
        conn.commit()
    # A completion inside the caller's transaction is refused with JobLost, and rolled back
    # with that transaction: nothing of it is stored.
    assert get(store, job_id) == dataclasses.replace(owned, fence_rejections=4)

    assert store.job_heartbeat_many([ref(new)]).renewed == {job_id}
    assert finish(store, new, Outcome.DONE)
    done = get(store, job_id)
    assert (done.status, done.worker_id) == (JobStatus.DONE, "new")
    assert [e["error"] for e in done.errors] == ["LeaseExpired"]


# -- completion and enqueue in the caller's transaction -------------------------------------


def test_complete_in_a_committed_transaction(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    with caller_connection(store) as conn:
        assert store.job_complete_in(conn, ref(job))
        assert get(store, job_id).status is JobStatus.RUNNING  # not committed yet
        conn.commit()
    before = store.db_now()
    stored = get(store, job_id)
    assert stored.status is JobStatus.DONE
    assert stored.locked_until is None
    assert stored.finished_at is not None
    assert stored.finished_at <= before


def test_complete_in_a_rolled_back_transaction(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    with caller_connection(store) as conn:
        assert store.job_complete_in(conn, ref(job))
        conn.rollback()
    assert get(store, job_id) == job
    assert finish(store, job, Outcome.DONE)


def test_complete_in_with_a_stale_token(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    with caller_connection(store) as conn:
        assert not store.job_complete_in(conn, JobLeaseRef(job_id, job.lease_token + 1))
        conn.commit()
    assert get(store, job_id) == job
    assert finish(store, job, Outcome.DONE)
    with caller_connection(store) as conn:
        assert not store.job_complete_in(conn, ref(job))  # done already
        conn.commit()


@pytest.mark.parametrize("count", [1, 3, 70])
def test_enqueue_in_a_rolled_back_transaction_leaves_no_job(store: Store, count: int) -> None:
    with caller_connection(store) as conn:
        results = store.job_insert_many([params(key=None) for _ in range(count)], conn=conn)
        assert len(results) == count
        assert store.job_get(results[0].id) is None  # invisible outside the transaction
        conn.rollback()
    assert store.stats() == []
    assert claim(store) == []


@pytest.mark.parametrize("count", [1, 3, 70])
def test_enqueue_in_a_committed_transaction(store: Store, count: int) -> None:
    with caller_connection(store) as conn:
        results = store.job_insert_many([params(payload={"i": i}) for i in range(count)], conn=conn)
        conn.commit()
    assert all(r.created for r in results)
    assert [get(store, r.id).payload for r in results] == [{"i": i} for i in range(count)]


def test_enqueue_in_a_transaction_respects_live_keys(store: Store) -> None:
    [held] = insert(store, params(key="k"))
    with caller_connection(store) as conn:
        results = store.job_insert_many([params(key="k"), params(key="new")], conn=conn)
        conn.commit()
    assert (results[0].id, results[0].created) == (held, False)
    assert results[1].created


# -- the async variants PostgreSQL offers for async callers ---------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_async_enqueue_and_complete_in_the_callers_transaction(
    pg_store: PostgresStore, commit: bool
) -> None:
    store = pg_store
    [running_id] = insert(store)
    running = claim_one(store)

    async def work() -> list[JobInsertResult]:
        async with await psycopg.AsyncConnection.connect(store.dsn) as conn:
            jobs = [params(key="a"), params(key="a"), params(payload={"n": 1})]
            results = await store.job_insert_many_async(jobs, conn)
            assert await store.job_complete_in_async(conn, ref(running))
            assert not await store.job_complete_in_async(conn, JobLeaseRef(running_id, 99))
            await (conn.commit() if commit else conn.rollback())
        return results

    results = asyncio.run(work())
    assert [r.created for r in results] == [True, False, True]
    assert results[0].id == results[1].id
    if commit:
        assert get(store, results[2].id).payload == {"n": 1}
        assert get(store, running_id).status is JobStatus.DONE
    else:
        assert store.job_get(results[0].id) is None
        assert get(store, running_id) == running


def test_a_retry_that_keeps_its_place_runs_at_once_ahead_of_later_jobs(store: Store) -> None:
    first, _ = insert(store, params(run_at=PAST), params(run_at=PAST + timedelta(seconds=1)))
    job = claim_one(store)
    assert job.id == first
    result = JobFinishParams(job.id, job.lease_token, Outcome.RETRY, 30.0, keep_place=True)
    assert store.job_finish_many([result]) == {first}
    again = get(store, first)
    assert (again.status, again.run_at) == (JobStatus.PENDING, PAST)
    assert claim_one(store).id == first  # still ahead of `later`, and the delay was ignored


def test_a_skip_job_retried_in_place_gets_a_fresh_grace(store: Store) -> None:
    [job_id] = insert(store, params(misfire="skip", misfire_grace=60.0))
    job = claim_one(store)
    before = store.db_now()
    result = JobFinishParams(job.id, job.lease_token, Outcome.RETRY, keep_place=True)
    assert store.job_finish_many([result]) == {job_id}
    assert get(store, job_id).run_at >= before
