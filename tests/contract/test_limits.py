"""Contract: paused queues, rate and concurrency limits, key limits and the misfire "skip"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from chronoq.core.jobs import JobStatus, Outcome
from chronoq.core.ratelimit import KeyLimit
from chronoq.storage.base import JobClaimParams, JobPruneParams, QueueLimitParams

from .support import Store, claim, finish, get, insert, params

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def claim_with_wakeup(store: Store, queues: list[str], limit: int = 100):  # type: ignore[no-untyped-def]
    return store.job_claim_with_wakeup(JobClaimParams(queues, limit, "w1"))


def test_a_paused_queue_claims_nothing_until_resumed(store: Store) -> None:
    [job_id] = insert(store, params("mail"))
    [other] = insert(store, params("sms"))
    settings = store.queue_pause("mail", True)
    assert settings.paused and not settings.limited
    assert [job.id for job in claim(store, queues=["mail", "sms"])] == [other]
    wakeup = claim_with_wakeup(store, ["mail"]).wakeup
    assert wakeup.next_run_at is None  # a paused queue's jobs do not wake the worker
    assert not store.queue_pause("mail", False).paused
    assert [job.id for job in claim(store, queues=["mail"])] == [job_id]


def test_queue_settings_are_listed_and_cleared(store: Store) -> None:
    assert store.queue_get("mail").limited is False
    store.queue_limit(QueueLimitParams("mail", rate=5.0, burst=2.0, concurrency=3))
    store.key_limit_set("api", KeyLimit("host:*", 1.0, 1.0))
    listed = {queue.name: queue for queue in store.queue_list()}
    assert (listed["mail"].rate, listed["mail"].burst, listed["mail"].concurrency) == (5.0, 2.0, 3)
    assert listed["api"].key_limits == (KeyLimit("host:*", 1.0, 1.0),)
    assert listed["api"].limited
    cleared = store.queue_limit(QueueLimitParams("mail"))
    assert not cleared.limited
    assert store.key_limit_remove("api", "host:*")
    assert not store.key_limit_remove("api", "host:*")
    assert not store.queue_get("api").limited


def test_key_limits_are_listed_in_byte_order(store: Store) -> None:
    # Byte order and a linguistic collation disagree on these: "B" < "_" < "a" < "b" by bytes.
    patterns = ["b:*", "B:*", "a:*", "_:*"]
    for pattern in patterns:
        store.key_limit_set("api", KeyLimit(pattern, 1.0, 1.0))
    listed = store.queue_get("api").key_limits
    assert [limit.pattern for limit in listed] == sorted(patterns)
    assert [limit.pattern for limit in store.queue_list()[0].key_limits] == sorted(patterns)


def test_a_rate_limit_spends_its_bucket_and_names_the_next_token(store: Store) -> None:
    insert(store, *[params("slow") for _ in range(10)])
    store.queue_limit(QueueLimitParams("slow", rate=1 / 3600, burst=3.0))
    first = claim_with_wakeup(store, ["slow"])
    assert len(first.jobs) == 3  # a full bucket: the burst
    second = claim_with_wakeup(store, ["slow"])
    assert second.jobs == []
    wakeup = second.wakeup
    assert wakeup.next_run_at is not None
    # One token an hour: the next is about an hour away.
    wait = (wakeup.next_run_at - wakeup.db_now).total_seconds()
    assert 3500 < wait <= 3600


def test_storing_the_same_rate_again_keeps_the_bucket(store: Store) -> None:
    insert(store, *[params("slow") for _ in range(10)])
    limit = QueueLimitParams("slow", rate=1 / 3600, burst=3.0)
    store.queue_limit(limit)
    assert len(claim(store, queues=["slow"])) == 3
    store.queue_limit(limit)  # a worker restarting declares it again: no second burst
    assert claim(store, queues=["slow"]) == []
    store.queue_limit(QueueLimitParams("slow", rate=1 / 3600, burst=2.0))  # a new limit
    assert len(claim(store, queues=["slow"])) == 2


def test_a_concurrency_limit_holds_across_claims_until_jobs_finish(store: Store) -> None:
    insert(store, *[params("pool") for _ in range(5)])
    store.queue_limit(QueueLimitParams("pool", concurrency=2))
    first = claim(store, queues=["pool"])
    assert len(first) == 2
    assert claim(store, queues=["pool"], worker_id="w2") == []
    assert finish(store, first[0], Outcome.DONE)
    assert len(claim(store, queues=["pool"], worker_id="w2")) == 1


def test_limited_and_open_queues_are_claimed_together(store: Store) -> None:
    insert(store, *[params("open") for _ in range(3)])
    insert(store, *[params("slow") for _ in range(3)])
    store.queue_limit(QueueLimitParams("slow", rate=1 / 3600, burst=1.0))
    jobs = claim(store, queues=["open", "slow"])
    assert sorted(job.queue for job in jobs) == ["open", "open", "open", "slow"]


def test_a_noisy_key_is_deferred_and_other_keys_are_claimed(store: Store) -> None:
    noisy = insert(store, *[params("api", rate_key="customer:noisy") for _ in range(6)])
    quiet = insert(store, *[params("api", rate_key="customer:quiet") for _ in range(2)])
    [plain] = insert(store, params("api"))
    store.key_limit_set("api", KeyLimit("customer:*", rate=1 / 60, burst=2.0))
    claimed = claim(store, queues=["api"])
    assert sorted(job.id for job in claimed) == sorted(noisy[:2] + quiet + [plain])
    deferred = [get(store, job_id) for job_id in noisy[2:]]
    assert all(job.status is JobStatus.PENDING for job in deferred)
    # Waiting for their key's tokens, a minute apart and in their order.
    gaps = [(b.run_at - a.run_at).total_seconds() for a, b in pairwise(deferred)]
    assert gaps == pytest.approx([60.0, 60.0, 60.0], abs=0.01)
    assert claim(store, queues=["api"]) == []


def test_pruning_keeps_a_key_bucket_until_its_slowest_limit_has_refilled(store: Store) -> None:
    """The store does not record which of its queue's limits a bucket serves, so a bucket is
    pruned only once every limit's refill time has passed; pruning it when a faster limit's
    had would hand the key a full bucket again."""
    store.key_limit_set("api", KeyLimit("fast:*", rate=1_000_000.0, burst=1.0))  # 1 µs
    store.key_limit_set("api", KeyLimit("slow:*", rate=1 / 3600, burst=1.0))  # an hour
    insert(store, params("api", rate_key="slow:a"))
    assert len(claim(store, queues=["api"])) == 1  # the key's one token is spent
    store.job_prune(JobPruneParams(older_than=timedelta(days=1)))
    [second] = insert(store, params("api", rate_key="slow:a"))
    assert claim(store, queues=["api"]) == []
    assert get(store, second).status is JobStatus.PENDING


def test_a_job_picked_up_past_its_grace_with_skip_is_skipped(store: Store) -> None:
    [skipped] = insert(store, params(run_at=LONG_AGO, misfire="skip", misfire_grace=60.0))
    [late] = insert(store, params(run_at=LONG_AGO))  # run_late: runs however late
    [fresh] = insert(store, params(misfire="skip", misfire_grace=3600.0))
    claimed = claim(store)
    assert sorted(job.id for job in claimed) == sorted([late, fresh])
    job = get(store, skipped)
    assert job.status is JobStatus.SKIPPED and job.attempts == 0
    assert job.finished_at is not None
    assert ("q", JobStatus.SKIPPED, 1) in {(s.queue, s.status, s.count) for s in store.stats()}


def test_skip_applies_on_limited_queues_too(store: Store) -> None:
    [skipped] = insert(store, params("slow", run_at=LONG_AGO, misfire="skip", misfire_grace=1.0))
    [runs] = insert(store, params("slow"))
    store.queue_limit(QueueLimitParams("slow", rate=1 / 3600, burst=1.0))
    assert [job.id for job in claim(store, queues=["slow"])] == [runs]
    assert get(store, skipped).status is JobStatus.SKIPPED


def test_the_claimed_jobs_started_at_is_the_instant_the_bucket_was_charged(store: Store) -> None:
    insert(store, *[params("slow") for _ in range(2)])
    store.queue_limit(QueueLimitParams("slow", rate=100.0, burst=2.0))
    before = store.db_now()
    jobs = claim(store, queues=["slow"])
    assert len(jobs) == 2
    assert len({job.started_at for job in jobs}) == 1
    started = jobs[0].started_at
    assert started is not None and before <= started <= store.db_now() + timedelta(seconds=1)
