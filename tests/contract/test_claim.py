"""Contract: claiming due jobs, alone and against concurrent claimers."""

from __future__ import annotations

import json
import multiprocessing
import queue
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from chronoq.core.jobs import JobStatus, Outcome, Wakeup
from chronoq.storage.base import JobClaimParams, QueueLimitParams
from chronoq.storage.sqlite.store import SqliteStore

from .support import (
    DEADLINE,
    Store,
    claim,
    claim_one,
    claim_until_empty,
    finish,
    get,
    insert,
    params,
    process_claimer,
    run_together,
)

PAST = datetime(2020, 1, 1, tzinfo=UTC)


def test_claim_takes_only_due_pending_jobs(store: Store) -> None:
    [due] = insert(store)
    insert(store, params(delay_seconds=3600))
    [done] = insert(store)
    assert finish(store, claim_one(store), Outcome.DONE)  # `due` is older: claimed first
    assert get(store, due).status is JobStatus.DONE
    jobs = claim(store)
    assert [job.id for job in jobs] == [done]
    assert claim(store) == []


def test_claim_takes_only_the_given_queues(store: Store) -> None:
    [a] = insert(store, params("a"))
    [b] = insert(store, params("b"))
    insert(store, params("c"))
    assert claim(store, queues=["x"]) == []
    assert sorted(job.id for job in claim(store, queues=["a", "b"])) == [a, b]
    assert [job.queue for job in claim(store, queues=["a", "b", "c"])] == ["c"]


def test_claim_takes_at_most_limit(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(7)])
    first = claim(store, limit=3)
    second = claim(store, limit=3)
    third = claim(store, limit=3)
    assert [len(first), len(second), len(third)] == [3, 3, 1]
    assert sorted(job.id for job in first + second + third) == ids


def _ordered_jobs(store: Store) -> list[int]:
    """Jobs inserted out of order; returns their ids in the order claims must take them."""
    specs = [
        # (queue, priority, seconds after PAST)
        ("a", 0, 30),
        ("b", 5, 50),
        ("a", 5, 40),
        ("b", 0, 10),
        ("a", -3, 0),
        ("b", 5, 40),  # same priority and run_at as the third: the lower id goes first
        ("a", 0, 10),
    ]
    ids = insert(
        store,
        *[params(q, run_at=PAST + timedelta(seconds=s), priority=p) for q, p, s in specs],
    )
    keyed = sorted(zip(specs, ids, strict=True), key=lambda x: (-x[0][1], x[0][2], x[1]))
    return [job_id for _, job_id in keyed]


def test_a_queue_named_twice_is_claimed_from_once(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(4)])
    assert sorted(job.id for job in claim(store, queues=["q", "q"], limit=4)) == ids


@pytest.mark.parametrize("limit", [0, -1])
def test_claim_with_no_free_slots_takes_nothing(store: Store, limit: int) -> None:
    [job_id] = insert(store)
    assert claim(store, limit=limit) == []
    assert get(store, job_id).status is JobStatus.PENDING


def test_claim_order_is_priority_then_run_at_then_id(store: Store) -> None:
    expected = _ordered_jobs(store)
    one_by_one = [claim_one(store, queues=["a", "b"]).id for _ in expected]
    assert one_by_one == expected


def test_a_batch_comes_back_in_claim_order(store: Store) -> None:
    expected = _ordered_jobs(store)
    assert [job.id for job in claim(store, queues=["b", "a"], limit=4)] == expected[:4]
    assert [job.id for job in claim(store, queues=["a", "b"], limit=10)] == expected[4:]


@pytest.mark.parametrize("priorities", [1, 4, 10, 11, 30])
def test_claims_follow_claim_order_however_many_priorities_are_pending(
    store: Store, priorities: int
) -> None:
    """PostgreSQL finds a queue's due rows one priority at a time up to 10 distinct priorities
    pending, and scans the queue whole beyond: both keep the claim order, beside jobs not due."""
    taken, expected = _claim_all_in_order(store, priorities, ["a", "b"])
    assert taken == expected


@pytest.mark.parametrize("priorities", [1, 4, 11])
def test_a_limited_queue_is_claimed_in_claim_order_however_many_priorities(
    store: Store, priorities: int
) -> None:
    store.queue_limit(QueueLimitParams("a", concurrency=1_000))
    taken, expected = _claim_all_in_order(store, priorities, ["a"])
    assert taken == expected


def _claim_all_in_order(
    store: Store, priorities: int, queues: list[str]
) -> tuple[list[int], list[int]]:
    """120 jobs over `queues`, due and not, with `priorities` distinct priorities, claimed 7 at
    a time until none is left; returns the ids taken and those due in claim order."""
    now = store.db_now()
    spec = [
        (queues[n % len(queues)], (n * 7) % priorities - priorities // 2, (n * 37) % 200 - 100)
        for n in range(120)
    ]
    jobs = [params(q, run_at=now + timedelta(seconds=s), priority=p) for q, p, s in spec]
    ids = insert(store, *jobs)
    due = sorted((-p, s, job_id) for (_, p, s), job_id in zip(spec, ids, strict=True) if s <= 0)
    taken: list[int] = []
    while batch := claim(store, queues=queues, limit=7, now=now):
        taken += [job.id for job in batch]
    return taken, [job_id for _, _, job_id in due]


def test_claim_starts_an_attempt_under_a_lease(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=42.5, run_at=PAST))
    now = store.db_now()
    job = claim_one(store, worker_id="worker-7", now=now)
    assert job.id == job_id
    assert job.status is JobStatus.RUNNING
    assert (job.attempts, job.lease_token, job.worker_id) == (1, 1, "worker-7")
    assert job.started_at == now
    assert job.locked_until == now + timedelta(seconds=42.5)
    assert get(store, job_id) == job


def test_the_workers_lease_for_a_task_overrides_the_stored_one(store: Store) -> None:
    """`JobClaimParams.leases`: the worker running a task knows its lease best."""
    mine, other = insert(store, params(task="mine", lease_seconds=60), params(task="other"))
    now = store.db_now()
    jobs = store.job_claim_with_wakeup(
        JobClaimParams(["q"], 10, "w1", now, leases={"mine": 2.5})
    ).jobs
    leased = {job.id: (job.lease_seconds, job.locked_until) for job in jobs}
    assert leased[mine] == (2.5, now + timedelta(seconds=2.5))
    assert leased[other] == (60.0, now + timedelta(seconds=60))
    assert get(store, mine).lease_seconds == 2.5


def test_a_job_without_its_own_max_attempts_takes_the_workers_task_setting(
    store: Store,
) -> None:
    """`JobClaimParams.max_attempts`: NULL is filled in at claim; a number of the job's own wins."""
    known, own, unknown = insert(
        store, params(task="known"), params(task="known", max_attempts=7), params(task="stray")
    )
    assert get(store, known).max_attempts is None
    claimed = store.job_claim_with_wakeup(
        JobClaimParams(["q"], 10, "w1", max_attempts={"known": 3}, default_max_attempts=11)
    ).jobs
    assert {job.id: job.max_attempts for job in claimed} == {known: 3, own: 7, unknown: 11}
    assert get(store, known).max_attempts == 3


def test_every_claim_counts_an_attempt_and_moves_the_token(store: Store) -> None:
    [job_id] = insert(store)
    tokens = []
    for attempt in range(1, 4):
        job = claim_one(store)
        assert (job.id, job.attempts) == (job_id, attempt)
        tokens.append(job.lease_token)
        assert finish(store, job, Outcome.RETRY, delay=0)
    assert tokens == [1, 2, 3]


def test_claim_without_now_uses_the_database_clock(store: Store) -> None:
    insert(store, params(lease_seconds=60))
    before = store.db_now()
    job = claim_one(store)
    after = store.db_now()
    assert job.started_at is not None
    assert job.locked_until is not None
    assert before <= job.started_at <= after
    assert job.locked_until == job.started_at + timedelta(seconds=60)


def test_a_pinned_now_makes_future_jobs_claimable(store: Store) -> None:
    [job_id] = insert(store, params(delay_seconds=3600))
    assert claim(store) == []
    later = store.db_now() + timedelta(hours=2)
    assert [job.id for job in claim(store, now=later)] == [job_id]


def test_a_pinned_now_in_the_past_leaves_newer_jobs_alone(store: Store) -> None:
    insert(store)
    assert claim(store, now=PAST) == []


# -- concurrency ----------------------------------------------------------------------------

POOL = 500


def _assert_disjoint_and_complete(ids: list[int], claimed: list[list[int]]) -> None:
    every = [job_id for batch in claimed for job_id in batch]
    duplicates = [job_id for job_id, n in Counter(every).items() if n > 1]
    assert duplicates == []
    assert sorted(every) == sorted(ids)


@pytest.mark.timeout(60)
def test_concurrent_claimers_never_share_a_job(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(POOL)])
    results = run_together(store, 6, lambda own, n: claim_until_empty(own, f"w{n}", limit=7))
    _assert_disjoint_and_complete(ids, results)
    assert claim(store) == []
    stored = [get(store, job_id) for job_id in ids[:: POOL // 25]]
    assert all(job.status is JobStatus.RUNNING and job.attempts == 1 for job in stored)


@pytest.mark.timeout(90)
def test_claimers_in_separate_processes_never_share_a_job(sqlite_store: SqliteStore) -> None:
    store = sqlite_store
    ids = insert(store, *[params() for _ in range(POOL)])
    context = multiprocessing.get_context("spawn")
    processes = 3
    start = context.Barrier(processes)
    results = context.Queue()
    children = [
        context.Process(
            target=process_claimer,
            args=(store.dsn_display, f"p{n}", 5, start, results),
            daemon=True,
        )
        for n in range(processes)
    ]
    try:
        for child in children:
            child.start()
        claimed: dict[str, list[int]] = {}
        for _ in children:
            try:
                worker_id, batch = results.get(timeout=DEADLINE)
            except queue.Empty:
                pytest.fail("a claiming process did not report in time")
            claimed[worker_id] = batch
        for child in children:
            child.join(DEADLINE)
            assert child.exitcode == 0
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(DEADLINE)
            child.close()
        results.close()
        results.join_thread()
    _assert_disjoint_and_complete(ids, list(claimed.values()))
    workers = {job.worker_id for job in claim(store, limit=1)} | {
        get(store, job_id).worker_id for job_id in ids
    }
    assert workers <= {"p0", "p1", "p2"}


# -- the wake-up that travels with a claim -------------------------------------------------


def claim_with_wakeup(
    store: Store, queues: list[str], limit: int, now: datetime
) -> tuple[list[int], Wakeup]:
    result = store.job_claim_with_wakeup(JobClaimParams(queues, limit, "w1", now))
    return [job.id for job in result.jobs], result.wakeup


def test_a_claim_reports_the_next_job_to_fall_due_after_its_clock(store: Store) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    [due] = insert(store, params(run_at=now - timedelta(seconds=1)))
    insert(
        store,
        params(run_at=now + timedelta(seconds=30)),
        params(run_at=now + timedelta(seconds=10), priority=-5),
        params("other", run_at=now + timedelta(seconds=1)),
    )
    claimed, wakeup = claim_with_wakeup(store, ["q"], 10, now)
    assert claimed == [due]
    assert wakeup.db_now == now
    assert wakeup.next_run_at == now + timedelta(seconds=10)
    assert wakeup.seconds_until_next() == 10.0


def test_a_full_claim_still_reports_only_jobs_due_later(store: Store) -> None:
    """Due rows left behind by a full claim are the next claim's business, not the timer's."""
    now = datetime(2030, 1, 1, tzinfo=UTC)
    insert(store, *[params(run_at=now - timedelta(seconds=i)) for i in range(3)])
    claimed, wakeup = claim_with_wakeup(store, ["q"], 2, now)
    assert len(claimed) == 2
    assert wakeup.next_run_at is None
    assert len(claim(store, now=now)) == 1


def test_a_claim_reports_the_earliest_lease_of_jobs_already_running(store: Store) -> None:
    insert(store, params("a", lease_seconds=50), params("b", lease_seconds=20))
    now = store.db_now()
    claim(store, queues=["a"], now=now)
    claimed, wakeup = claim_with_wakeup(store, ["b"], 10, now)
    assert len(claimed) == 1
    # The lease this claim starts is the claimer's own to keep; it reports the others'.
    assert wakeup.next_lease_expiry == now + timedelta(seconds=50)


def test_a_claim_without_room_claims_nothing_and_still_reports(store: Store) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    [waiting] = insert(store, params(run_at=now - timedelta(seconds=1)))
    insert(store, params(run_at=now + timedelta(seconds=5)))
    for limit in (0, -1):
        claimed, wakeup = claim_with_wakeup(store, ["q"], limit, now)
        assert claimed == []
        assert wakeup.next_run_at == now + timedelta(seconds=5)
    assert get(store, waiting).status is JobStatus.PENDING


def test_a_claim_on_an_empty_store_has_nothing_to_wait_for(store: Store) -> None:
    claimed, wakeup = claim_with_wakeup(store, ["q"], 10, datetime(2030, 1, 1, tzinfo=UTC))
    assert claimed == []
    assert wakeup.seconds_until_next() is None


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_claimed_job_reads_back_exactly_as_the_store_then_holds_it(store: Store) -> None:
    """The claim reads its rows on a path of its own (tuples, in binary on PostgreSQL): every
    field of the claimed Job equals what `job_get` reads of the same row afterwards."""
    past = datetime(2020, 1, 1, tzinfo=UTC)
    [job_id] = insert(
        store,
        params(
            payload={"nested": {"list": [1, 2.5, "ü"]}, "none": None},
            run_at=past,
            priority=7,
            max_attempts=4,
            lease_seconds=30.0,
            key="read-back",
            misfire="skip",
            misfire_grace=1e9,
            rate_key="tenant-1",
            schedule="nightly",
            tick=past,
            ticks=2,
            trace_context=json.dumps({"traceparent": TRACEPARENT}),
        ),
    )
    first = claim_one(store)
    assert finish(store, first, Outcome.RETRY, delay=0, error={"error": "E", "message": "m"})
    claimed = claim_one(store)
    assert claimed.id == job_id
    assert claimed.errors  # the first attempt's error, decoded
    assert claimed == get(store, job_id)
