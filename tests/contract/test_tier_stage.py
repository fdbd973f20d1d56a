"""Contract: the pending jobs a partition leader stages (tiered dispatch)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from chronoq.core.jobs import Outcome
from chronoq.core.ratelimit import KeyLimit
from chronoq.errors import ConfigError
from chronoq.storage.base import JobStageParams, JobStore, QueueLimitParams, StageRow, Staging
from chronoq.storage.sqlite.store import SqliteStore

from .support import Store, claim_one, finish, get, insert, params

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(seconds=60)


def stage(
    store: JobStore,
    partitions: list[int] | None = None,
    count: int = 1,
    horizon: timedelta = MINUTE,
    after_id: int = 0,
    limit: int = 1000,
    now: datetime | None = NOW,
) -> Staging:
    chosen = list(range(count)) if partitions is None else partitions
    return store.job_stage_candidates(
        JobStageParams(chosen, count, horizon, after_id=after_id, limit=limit, now=now)
    )


def staged_ids(staging: Staging) -> list[int]:
    return [row.id for row in staging.rows]


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_rows_carry_what_a_timer_needs(store: Store) -> None:
    [job_id] = insert(store, params("mail", run_at=at(5)))
    staging = stage(store)
    assert staging == Staging([StageRow(job_id, 0, "mail", at(5))], NOW)


def test_the_clock_is_pinned_to_the_statement_not_the_wait_for_a_connection(
    store: Store,
) -> None:
    """PostgreSQL times its own round trip (the leader's clock estimate pins db_now there);
    SQLite reads the clock in process and says nothing."""
    before = time.monotonic()
    staging = stage(store, now=None)
    after = time.monotonic()
    if isinstance(store, SqliteStore):
        assert staging.read_at is None
    else:
        assert staging.read_at is not None and before <= staging.read_at <= after


def test_the_token_staged_is_the_current_one(store: Store) -> None:
    [job_id] = insert(store)
    assert finish(store, claim_one(store), Outcome.RETRY, delay=0.0)
    [row] = stage(store, now=None).rows
    assert (row.id, row.lease_token) == (job_id, 1)


def test_jobs_are_staged_by_partition(store: Store) -> None:
    ids = insert(store, *[params(run_at=at(1)) for _ in range(12)])
    assert staged_ids(stage(store, [1, 3], count=4)) == [i for i in ids if i % 4 in (1, 3)]
    assert staged_ids(stage(store, [0], count=4)) == [i for i in ids if i % 4 == 0]
    assert staged_ids(stage(store, [3, 3], count=4)) == [i for i in ids if i % 4 == 3]
    assert staged_ids(stage(store, [], count=4)) == []
    assert staged_ids(stage(store, count=1)) == ids


def test_only_jobs_due_within_the_horizon_are_staged(store: Store) -> None:
    overdue, soon, edge, beyond = insert(
        store,
        params(run_at=at(-3600)),
        params(run_at=at(10)),
        params(run_at=at(60)),
        params(run_at=at(60.000001)),
    )
    assert staged_ids(stage(store)) == [overdue, soon, edge]
    assert staged_ids(stage(store, horizon=timedelta(seconds=10))) == [overdue, soon]
    assert staged_ids(stage(store, horizon=timedelta(0))) == [overdue]
    assert staged_ids(stage(store, now=at(1))) == [overdue, soon, edge, beyond]


def test_the_horizon_runs_from_the_database_clock(store: Store) -> None:
    near, far = insert(store, params(delay_seconds=30), params(delay_seconds=3600))
    before = store.db_now()
    staging = stage(store, now=None)
    assert staged_ids(staging) == [near]
    assert before <= staging.db_now <= store.db_now()
    assert far not in staged_ids(stage(store, now=None, horizon=timedelta(seconds=3500)))


def test_only_pending_jobs_are_staged(store: Store) -> None:
    running, done, cancelled, pending = insert(store, *[params(run_at=at(-1)) for _ in range(4)])
    assert claim_one(store, now=NOW).id == running
    assert finish(store, claim_one(store, now=NOW), Outcome.DONE)
    store.job_cancel(cancelled)
    assert staged_ids(stage(store)) == [pending]
    assert get(store, done).status.value == "done"


def test_the_cursor_and_the_limit_page_through_in_id_order(store: Store) -> None:
    # Inserted with run_at falling as ids rise: the order is the ids', not the run_ats'.
    ids = insert(store, *[params(run_at=at(50 - n)) for n in range(10)])
    pages = []
    after = 0
    while batch := staged_ids(stage(store, after_id=after, limit=3)):
        pages.append(batch)
        after = batch[-1]
    assert pages == [ids[0:3], ids[3:6], ids[6:9], ids[9:]]
    assert staged_ids(stage(store, limit=0)) == []
    assert staged_ids(stage(store, after_id=ids[-1])) == []


def test_paused_and_limited_queues_are_left_out(store: Store) -> None:
    kept, paused, rated, capped, keyed = insert(
        store, *[params(queue, run_at=at(1)) for queue in ("kept", "p", "r", "c", "k")]
    )
    store.queue_pause("p", True)
    store.queue_limit(QueueLimitParams("r", rate=2.0, burst=1.0))
    store.queue_limit(QueueLimitParams("c", concurrency=2))
    store.key_limit_set("k", KeyLimit("tenant:*", 1.0, 1.0))
    assert staged_ids(stage(store)) == [kept]
    store.queue_pause("p", False)
    store.queue_limit(QueueLimitParams("r"))
    assert staged_ids(stage(store)) == [kept, paused, rated]
    assert {capped, keyed}.isdisjoint(staged_ids(stage(store)))


def test_an_empty_store_still_reads_the_clock(store: Store) -> None:
    assert stage(store) == Staging([], NOW)
    insert(store, params(run_at=at(3600)))
    assert stage(store) == Staging([], NOW)


@pytest.mark.parametrize(
    ("partitions", "count", "problem"),
    [
        ([0], 0, "partition count must be from 1 to 1024, got 0"),
        ([0], 1025, "partition count must be from 1 to 1024, got 1025"),
        ([4, 1, -1], 4, r"partitions \[-1, 4\] do not exist with a partition count of 4"),
    ],
)
def test_partitions_that_do_not_exist_are_refused(
    store: Store, partitions: list[int], count: int, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        stage(store, partitions, count=count)


def test_a_negative_horizon_is_refused_and_a_huge_one_is_bounded(store: Store) -> None:
    with pytest.raises(ConfigError, match="staging horizon must not be negative"):
        stage(store, horizon=timedelta(seconds=-1))
    [far] = insert(store, params(run_at=at(86400 * 365 * 50)))
    assert staged_ids(stage(store, horizon=timedelta(days=10**6))) == [far]
