"""Contract: wake-up times, inspection, cancelling, dead letters and statistics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chronoq.core.jobs import MAX_ID, JobStatus, Outcome, Stat
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    JobHeartbeatResult,
    JobLeaseRef,
    JobListParams,
    JobPruneParams,
    JobRescueParams,
)

from .support import Store, claim, claim_one, finish, get, insert, make_dead, params, ref

PAST = datetime(2020, 1, 1, tzinfo=UTC)
ERROR = {"attempt": 1, "error": "ValueError", "message": "boom", "traceback": ""}

# -- next wake-up ---------------------------------------------------------------------------


def test_next_wakeup_of_an_empty_store(store: Store) -> None:
    before = store.db_now()
    wakeup = store.job_next_wakeup(["q"])
    after = store.db_now()
    assert before <= wakeup.db_now <= after
    assert (wakeup.next_run_at, wakeup.next_lease_expiry) == (None, None)
    assert wakeup.seconds_until_next() is None


def test_next_wakeup_finds_the_earliest_pending_run_at_of_the_queues(store: Store) -> None:
    base = datetime(2040, 1, 1, tzinfo=UTC)
    insert(
        store,
        params("a", run_at=base + timedelta(seconds=30), priority=9),
        params("a", run_at=base + timedelta(seconds=20)),
        params("b", run_at=base + timedelta(seconds=10)),
        params("c", run_at=base + timedelta(seconds=5)),
    )
    assert store.job_next_wakeup(["a"]).next_run_at == base + timedelta(seconds=20)
    assert store.job_next_wakeup(["a", "b"]).next_run_at == base + timedelta(seconds=10)
    assert store.job_next_wakeup(["x"]).next_run_at is None
    assert store.job_next_wakeup([]).next_run_at is None
    wakeup = store.job_next_wakeup(["b"])
    expected = (base + timedelta(seconds=10) - wakeup.db_now).total_seconds()
    assert wakeup.seconds_until_next() == expected


def test_next_wakeup_ignores_jobs_that_are_not_pending(store: Store) -> None:
    insert(store, params(run_at=PAST), params(run_at=PAST + timedelta(days=1)))
    assert store.job_next_wakeup(["q"]).next_run_at == PAST
    assert finish(store, claim_one(store), Outcome.DONE)
    assert store.job_next_wakeup(["q"]).next_run_at == PAST + timedelta(days=1)
    assert store.job_next_wakeup(["q"]).seconds_until_next() == 0.0


def test_next_wakeup_finds_the_earliest_lease_expiry(store: Store) -> None:
    insert(store, params("a", lease_seconds=50), params("b", lease_seconds=20))
    now = store.db_now()
    claim(store, queues=["a", "b"], limit=2, now=now)
    wakeup = store.job_next_wakeup(["other"])
    assert wakeup.next_run_at is None
    assert wakeup.next_lease_expiry == now + timedelta(seconds=20)


# -- get and list ---------------------------------------------------------------------------


def test_get_an_unknown_job(store: Store) -> None:
    assert store.job_get(424242) is None


def test_list_newest_first_with_filters(store: Store) -> None:
    ids = insert(
        store,
        params("a", "t1"),
        params("a", "t2"),
        params("b", "t1"),
        params("b", "t2"),
        params("a", "t1"),
    )
    claim_one(store, queues=["a"])  # ids[0] is running

    def listed(**kwargs: object) -> list[int]:
        return [job.id for job in store.job_list(JobListParams(**kwargs))]  # type: ignore[arg-type]

    assert listed() == ids[::-1]
    assert listed(queue="a") == [ids[4], ids[1], ids[0]]
    assert listed(task="t2") == [ids[3], ids[1]]
    assert listed(queue="b", task="t1") == [ids[2]]
    assert listed(statuses=[JobStatus.RUNNING]) == [ids[0]]
    assert listed(statuses=[JobStatus.RUNNING, JobStatus.PENDING]) == ids[::-1]
    assert listed(statuses=[JobStatus.DEAD]) == []
    assert listed(queue="nope") == []
    assert store.job_list(JobListParams(queue="a"))[-1] == get(store, ids[0])
    worker = get(store, ids[0]).worker_id
    assert worker is not None
    assert listed(worker=worker) == [ids[0]]
    assert listed(worker=worker + "x") == []


def test_list_pages_with_before_id(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(7)])
    pages: list[list[int]] = []
    before: int | None = None
    while page := store.job_list(JobListParams(limit=3, before_id=before)):
        pages.append([job.id for job in page])
        before = page[-1].id
    assert pages == [ids[6:3:-1], ids[3:0:-1], ids[0:1]]


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_a_pending_job(store: Store) -> None:
    [job_id] = insert(store)
    before = store.db_now()
    cancelled = store.job_cancel(job_id)
    assert cancelled is not None
    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.finished_at is not None
    assert cancelled.finished_at >= before
    assert get(store, job_id) == cancelled
    assert claim(store) == []


def test_cancel_a_running_job_locks_its_owner_out(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    cancelled = store.job_cancel(job_id)
    assert cancelled is not None
    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.locked_until is None
    assert (cancelled.worker_id, cancelled.lease_token) == ("w1", job.lease_token)
    assert not finish(store, job, Outcome.DONE)
    assert not finish(store, job, Outcome.RETRY, error=ERROR)
    assert store.job_release_many([ref(job)]) == set()
    assert get(store, job_id) == cancelled


def test_the_heartbeat_of_a_cancelled_attempt_says_cancelled_not_lost(store: Store) -> None:
    """The worker of a running job that is cancelled learns it from its next heartbeat, which
    tells it apart from a lease that was lost; no lease is renewed and nothing is counted as a
    fencing rejection."""
    insert(store, params(), params())
    kept, cancelled = claim(store, limit=2)
    store.job_cancel(cancelled.id)
    before = get(store, cancelled.id)
    stale = JobLeaseRef(cancelled.id, cancelled.lease_token - 1)
    result = store.job_heartbeat_many([ref(kept), ref(cancelled), stale])
    assert result == JobHeartbeatResult(renewed={kept.id}, cancelled={cancelled.id})
    assert get(store, cancelled.id) == before
    assert store.job_cancelled_among([ref(kept), ref(cancelled), stale]) == {cancelled.id}
    assert store.job_cancelled_among([]) == set()


def test_a_cancelled_attempt_records_its_end_and_the_job_stays_cancelled(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    cancelled = store.job_cancel(job_id)
    assert cancelled is not None
    record = ERROR | {"error": "chronoq.errors.JobCancelled", "outcome": "cancelled"}
    assert finish(store, job, Outcome.CANCELLED, error=record)
    after = get(store, job_id)
    assert (after.status, after.finished_at, after.locked_until) == (
        JobStatus.CANCELLED,
        cancelled.finished_at,
        None,
    )
    assert [e["error"] for e in after.errors] == ["chronoq.errors.JobCancelled"]
    assert after.errors[0]["attempt"] == 1
    assert claim(store) == []


def test_only_the_attempt_running_at_the_cancel_hears_of_it(store: Store) -> None:
    """A job cancelled while it waited (for its retry, or after its lease was rescued) had no
    attempt running: an old attempt's token is refused as stale, not told "cancelled"."""
    insert(store, params(max_attempts=3), params(max_attempts=3, lease_seconds=5))
    retried, rescued = claim(store, limit=2)
    assert finish(store, retried, Outcome.RETRY, delay=3600, error=ERROR)
    later = store.db_now() + timedelta(seconds=6)
    assert store.job_rescue_expired(JobRescueParams(now=later)).requeued == [rescued.id]
    for job in (retried, rescued):
        cancelled = store.job_cancel(job.id)
        assert cancelled is not None and cancelled.worker_id is None
    refs = [ref(retried), ref(rescued)]
    assert store.job_heartbeat_many(refs) == JobHeartbeatResult()
    assert store.job_cancelled_among(refs) == set()
    assert not finish(store, rescued, Outcome.CANCELLED, error=ERROR)


@pytest.mark.parametrize("outcome", [Outcome.DONE, Outcome.DEAD, Outcome.CANCELLED])
def test_cancel_leaves_a_final_job_as_it_is(store: Store, outcome: Outcome) -> None:
    [job_id] = insert(store)
    assert finish(store, claim_one(store), outcome)
    final = get(store, job_id)
    assert store.job_cancel(job_id) == final
    assert get(store, job_id) == final


def test_cancel_an_unknown_job(store: Store) -> None:
    assert store.job_cancel(424242) is None


# Ids no job can have: the drivers refuse to send integers beyond 64 bits, and ids start at 1.
UNSTORABLE_IDS = [0, -1, -(2**63) - 1, MAX_ID + 1, 2**70]


@pytest.mark.parametrize("job_id", UNSTORABLE_IDS)
def test_get_and_cancel_answer_not_found_for_an_id_no_job_can_have(
    store: Store, job_id: int
) -> None:
    assert store.job_get(job_id) is None
    assert store.job_cancel(job_id) is None


# -- dead letters ---------------------------------------------------------------------------


def test_requeue_dead_jobs_by_id(store: Store) -> None:
    first = make_dead(store, params())
    second = make_dead(store, params())
    result = store.dead_requeue(DeadRequeueParams(ids=[first.id, 424242]))
    assert (result.requeued, result.key_conflicts) == ([first.id], [])

    before = store.db_now()
    requeued = get(store, first.id)
    assert requeued.status is JobStatus.PENDING
    assert requeued.attempts == 0
    assert requeued.run_at <= before
    assert requeued.errors == first.errors
    assert (requeued.finished_at, requeued.locked_until) == (None, None)
    assert requeued.worker_id is None
    assert get(store, second.id) == second

    again = claim_one(store)
    assert (again.id, again.attempts) == (first.id, 1)
    assert again.lease_token > first.lease_token  # tokens never go back


def test_requeue_ignores_jobs_that_are_not_dead(store: Store) -> None:
    pending, running, done = insert(store, params(), params(), params())
    claimed = claim(store, limit=2)
    assert finish(store, claimed[1], Outcome.DONE)
    before = [get(store, i) for i in (pending, running, done)]
    result = store.dead_requeue(DeadRequeueParams(ids=[pending, running, done]))
    assert (result.requeued, result.key_conflicts) == ([], [])
    assert store.dead_requeue(DeadRequeueParams()).requeued == []
    assert [get(store, i) for i in (pending, running, done)] == before


def test_requeue_tells_unknown_ids_apart_from_jobs_that_are_not_dead(store: Store) -> None:
    dead = make_dead(store, params("a")).id
    other_queue = make_dead(store, params("b")).id
    [pending] = insert(store, params("a"))
    asked = [pending, 424242, dead, other_queue, MAX_ID + 1, -1]
    result = store.dead_requeue(DeadRequeueParams(ids=asked, queue="a"))
    assert result.requeued == [dead]
    assert result.key_conflicts == []
    assert result.not_dead == sorted([pending, other_queue])
    assert result.not_found == [-1, 424242, MAX_ID + 1]


def test_requeue_of_every_dead_job_names_no_id_as_missing(store: Store) -> None:
    dead = make_dead(store, params()).id
    result = store.dead_requeue(DeadRequeueParams())
    assert (result.requeued, result.not_dead, result.not_found) == ([dead], [], [])


def test_requeue_all_and_by_queue(store: Store) -> None:
    a1 = make_dead(store, params("a")).id
    b1 = make_dead(store, params("b")).id
    a2 = make_dead(store, params("a")).id
    result = store.dead_requeue(DeadRequeueParams(queue="a"))
    assert (result.requeued, result.key_conflicts) == ([a1, a2], [])
    assert get(store, b1).status is JobStatus.DEAD
    assert store.dead_requeue(DeadRequeueParams(ids=[b1], queue="a")).requeued == []
    assert store.dead_requeue(DeadRequeueParams()).requeued == [b1]


def test_requeue_reports_a_key_held_by_a_live_job(store: Store) -> None:
    dead = make_dead(store, params(key="k"))
    [live] = insert(store, params(key="k"))
    result = store.dead_requeue(DeadRequeueParams(ids=[dead.id]))
    assert (result.requeued, result.key_conflicts) == ([], [dead.id])
    assert get(store, dead.id) == dead
    assert store.dead_requeue(DeadRequeueParams()).key_conflicts == [dead.id]

    assert finish(store, claim_one(store), Outcome.DONE)
    assert get(store, live).status is JobStatus.DONE
    assert store.dead_requeue(DeadRequeueParams()).requeued == [dead.id]


def test_of_dead_jobs_sharing_a_key_only_the_newest_is_requeued(store: Store) -> None:
    older = make_dead(store, params(key="k")).id
    newer = make_dead(store, params(key="k")).id
    result = store.dead_requeue(DeadRequeueParams())
    assert (result.requeued, result.key_conflicts) == ([newer], [older])
    assert get(store, older).status is JobStatus.DEAD


def test_requeue_keeps_keyless_jobs_apart_from_keys_that_look_like_ids(store: Store) -> None:
    keyless = make_dead(store, params()).id
    lookalikes = [make_dead(store, params(key=key)).id for key in (str(keyless), f"id:{keyless}")]
    result = store.dead_requeue(DeadRequeueParams())
    assert (result.requeued, result.key_conflicts) == (sorted([keyless, *lookalikes]), [])


def test_requeue_and_purge_leave_out_ids_no_job_can_have(store: Store) -> None:
    """Both stores filter the ids alike: the ones no job can have match nothing and refuse
    nothing, and the others are requeued or purged as asked."""
    requeued, purged = make_dead(store, params()).id, make_dead(store, params()).id
    result = store.dead_requeue(DeadRequeueParams(ids=[*UNSTORABLE_IDS, requeued]))
    assert (result.requeued, result.key_conflicts) == ([requeued], [])
    assert store.dead_requeue(DeadRequeueParams(ids=UNSTORABLE_IDS)).requeued == []
    assert store.dead_purge(DeadPurgeParams(ids=UNSTORABLE_IDS)) == 0
    assert store.dead_purge(DeadPurgeParams(ids=[*UNSTORABLE_IDS, purged])) == 1
    assert store.job_get(purged) is None
    assert get(store, requeued).status is JobStatus.PENDING


def test_purge_keeps_dead_jobs_younger_than_older_than(store: Store) -> None:
    """A job rescued with a pinned clock dies at that (past) moment: old enough to purge."""
    [old] = insert(store, params(run_at=PAST, max_attempts=1, lease_seconds=1))
    claim_one(store, now=PAST)
    assert store.job_rescue_expired(JobRescueParams(now=PAST + timedelta(seconds=2))).dead == [old]
    assert get(store, old).finished_at == PAST + timedelta(seconds=2)
    recent = make_dead(store, params()).id
    assert store.dead_purge(DeadPurgeParams(older_than=timedelta(days=1))) == 1
    assert store.job_get(old) is None
    assert get(store, recent).status is JobStatus.DEAD


def test_purge_dead_jobs(store: Store) -> None:
    dead_a = make_dead(store, params("a")).id
    dead_b = make_dead(store, params("b")).id
    [done] = insert(store, params("a"))
    assert finish(store, claim_one(store, queues=["a"]), Outcome.DONE)
    [pending] = insert(store, params("a"))

    assert store.dead_purge(DeadPurgeParams(older_than=timedelta(hours=1))) == 0
    assert store.dead_purge(DeadPurgeParams(queue="a")) == 1
    assert store.job_get(dead_a) is None
    assert store.dead_purge(DeadPurgeParams()) == 1
    assert store.job_get(dead_b) is None
    assert {get(store, done).status, get(store, pending).status} == {"done", "pending"}
    assert store.dead_purge(DeadPurgeParams()) == 0


# -- statistics -----------------------------------------------------------------------------


def test_stats_count_jobs_per_queue_and_status(store: Store) -> None:
    assert store.stats() == []
    insert(store, params("b"), params("b"), params("a"), params("a"), params("a"))
    make_dead(store, params("c"))
    claim_one(store, queues=["a"])
    assert sorted(store.stats(), key=lambda s: (s.queue, s.status)) == store.stats()
    assert set(store.stats()) == {
        Stat("a", JobStatus.PENDING, 2),
        Stat("a", JobStatus.RUNNING, 1),
        Stat("b", JobStatus.PENDING, 2),
        Stat("c", JobStatus.DEAD, 1),
    }


def test_prune_deletes_old_finished_jobs_and_keeps_dead_and_live_ones(store: Store) -> None:
    [done_id] = insert(store, params("done"))
    assert finish(store, claim_one(store, queues=["done"]), Outcome.DONE)
    [cancelled_id] = insert(store, params("cancel"))
    store.job_cancel(cancelled_id)
    late = params(
        "skip", run_at=datetime(2020, 1, 1, tzinfo=UTC), misfire="skip", misfire_grace=1.0
    )
    [skipped_id] = insert(store, late)
    assert claim(store, queues=["skip"]) == []
    dead = make_dead(store, params("dead"))
    [pending_id] = insert(store, params("live"))
    assert store.job_prune(JobPruneParams(older_than=timedelta(days=1))) == 0
    assert store.job_prune(JobPruneParams(older_than=timedelta(0))) == 3
    assert [store.job_get(i) for i in (done_id, cancelled_id, skipped_id)] == [None] * 3
    assert get(store, dead.id).status is JobStatus.DEAD
    assert get(store, pending_id).status is JobStatus.PENDING


def test_prune_goes_in_batches(store: Store) -> None:
    ids = insert(store, *[params() for _ in range(5)])
    for job_id in ids:
        store.job_cancel(job_id)
    assert store.job_prune(JobPruneParams(older_than=timedelta(0), limit=2)) == 2
    assert store.job_prune(JobPruneParams(older_than=timedelta(0), limit=10)) == 3
