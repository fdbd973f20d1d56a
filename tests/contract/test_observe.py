"""Contract: what operators read — searches, selections of dead jobs, fencing rejections and the
overview behind the dashboard and the metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import (
    LATENESS_BOUNDS,
    DeadPurgeParams,
    DeadRequeueParams,
    JobHeartbeatResult,
    JobLeaseRef,
    JobListParams,
    JobRescueParams,
    OverviewParams,
)

from .support import Store, claim, claim_one, finish, get, insert, make_dead, params, ref

FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


def _listed(store: Store, **kwargs: object) -> list[int]:
    return [job.id for job in store.job_list(JobListParams(**kwargs))]  # type: ignore[arg-type]


def test_list_by_key(store: Store) -> None:
    ids = insert(store, params(key="order-1"), params(key="order-2"), params())
    assert _listed(store, key="order-2") == [ids[1]]
    assert _listed(store, key="order-3") == []


def test_list_by_creation_time(store: Store) -> None:
    [first] = insert(store, params())
    middle = get(store, first).created_at + timedelta(microseconds=1)
    [second] = insert(store, params())
    assert get(store, second).created_at >= middle
    assert _listed(store, created_after=middle) == [second]
    assert _listed(store, created_before=middle) == [first]
    assert _listed(store, created_after=FUTURE) == []
    assert _listed(store, created_after=get(store, first).created_at) == [second, first]


def test_requeue_dead_jobs_of_one_task(store: Store) -> None:
    a = make_dead(store, params("q", "a"))
    b = make_dead(store, params("q", "b"))
    result = store.dead_requeue(DeadRequeueParams(task="b"))
    assert result.requeued == [b.id]
    assert get(store, a.id).status == JobStatus.DEAD
    assert get(store, b.id).status == JobStatus.PENDING


def test_purge_a_selection_of_dead_jobs(store: Store) -> None:
    dead = [make_dead(store, params("q", task)) for task in ("a", "a", "b")]
    [live] = insert(store, params())
    assert store.dead_purge(DeadPurgeParams(ids=[dead[0].id, live, 999_999])) == 1
    assert store.job_get(dead[0].id) is None
    assert store.dead_purge(DeadPurgeParams(task="a")) == 1
    assert store.job_get(dead[1].id) is None
    assert [j.id for j in store.job_list(JobListParams())] == [live, dead[2].id]


def test_stale_writes_are_counted_on_the_job(store: Store) -> None:
    insert(store, params(lease_seconds=0.01))
    first = claim_one(store)
    later = store.db_now() + timedelta(seconds=5)
    assert store.job_rescue_expired(JobRescueParams(now=later)).requeued == [first.id]
    taken_over = claim_one(store, now=later)
    assert taken_over.lease_token > first.lease_token
    assert store.job_heartbeat_many([ref(first)]) == JobHeartbeatResult()
    assert not finish(store, first, Outcome.DONE)
    assert store.job_release_many([ref(first)]) == set()
    assert get(store, first.id).fence_rejections == 3
    assert finish(store, taken_over, Outcome.DONE)
    # A heartbeat that crosses its own job's report names the current token: not a rejection.
    assert store.job_heartbeat_many([JobLeaseRef(first.id, taken_over.lease_token)]) == (
        JobHeartbeatResult()
    )
    assert get(store, first.id).fence_rejections == 3


def test_overview_of_an_empty_store(store: Store) -> None:
    before = store.db_now()
    overview = store.overview(OverviewParams())
    assert before <= overview.db_now <= store.db_now()
    assert (overview.queues, overview.finished) == ([], [])


def test_overview_counts_each_queue_now(store: Store) -> None:
    insert(store, params("a"), params("a"), params("a", run_at=FUTURE), params("b"))
    claim_one(store, queues=["a"])
    make_dead(store, params("c"))
    store.queue_pause("quiet", True)
    counts = {q.queue: q for q in store.overview(OverviewParams()).queues}
    assert sorted(counts) == ["a", "b", "c", "quiet"]
    a = counts["a"]
    assert (a.pending, a.due, a.running, a.dead) == (2, 1, 1, 0)
    assert a.oldest_due_age >= 0
    assert (counts["c"].dead, counts["c"].pending) == (1, 0)
    assert (counts["quiet"].pending, counts["quiet"].oldest_due_age) == (0, 0.0)


def test_overview_ages_the_oldest_due_job(store: Store) -> None:
    now = store.db_now()
    insert(store, params(run_at=now - timedelta(seconds=90)), params(run_at=now))
    [queue] = store.overview(OverviewParams()).queues
    assert 90 <= queue.oldest_due_age < 90 + 30


def test_overview_buckets_finished_jobs_and_counts_their_lateness(store: Store) -> None:
    now = store.db_now()
    insert(store, *[params(run_at=now - timedelta(seconds=2)) for _ in range(3)])
    insert(store, params("other"))
    jobs = claim(store, limit=3)
    for job, outcome in zip(jobs, [Outcome.DONE, Outcome.DONE, Outcome.DEAD], strict=True):
        assert finish(store, job, outcome)
    overview = store.overview(OverviewParams(window=60, bucket=10))
    counts: dict[tuple[str, JobStatus], int] = {}
    lateness = [0] * (len(LATENESS_BOUNDS) + 1)
    for bucket in overview.finished:
        key = (bucket.queue, bucket.status)
        counts[key] = counts.get(key, 0) + bucket.count
        assert bucket.start <= overview.db_now
        assert bucket.start.tzinfo is not None
        assert bucket.start.timestamp() % 10 == 0
        assert len(bucket.lateness) == (len(lateness) if bucket.status == JobStatus.DONE else 0)
        lateness = [
            a + b for a, b in zip(lateness, bucket.lateness or [0] * len(lateness), strict=True)
        ]
    assert counts == {("q", JobStatus.DONE): 2, ("q", JobStatus.DEAD): 1}
    # Both done jobs started about 2 s late: the bucket below 2.5 s (at or above 1 s).
    two_seconds = LATENESS_BOUNDS.index(2.5)
    assert lateness[two_seconds] == 2 and sum(lateness) == 2


def test_overview_since_reads_only_the_newest_buckets(store: Store) -> None:
    insert(store, params(), params())
    for job in claim(store, limit=2):
        assert finish(store, job, Outcome.DONE)
    whole = store.overview(OverviewParams(window=60, bucket=10))
    assert sum(b.count for b in whole.finished) == 2
    later = whole.db_now + timedelta(seconds=30)
    assert store.overview(OverviewParams(window=60, bucket=10, since=later)).finished == []
    again = store.overview(OverviewParams(window=60, bucket=10, since=whole.finished[0].start))
    assert again.finished == whole.finished


def test_overview_without_a_window_reads_no_finished_job(store: Store) -> None:
    insert(store, params())
    assert finish(store, claim_one(store), Outcome.DONE)
    assert store.overview(OverviewParams(window=60)).finished
    assert store.overview(OverviewParams(window=0)).finished == []
