"""Contract: the change listener wakes a waiting worker when another connection enqueues."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from chronoq.core.jobs import JobStatus
from chronoq.storage.base import ChangeListener, JobClaimParams, JobLeaseRef, JobRescueParams
from chronoq.storage.sqlite.store import SqliteStore
from chronoq.tier.stager import notified_run_at

from .support import DEADLINE, Store, claim_one, get, insert, open_store, params, ref


@pytest.fixture
def listener(store: Store) -> Iterator[ChangeListener]:
    opened = store.open_listener()
    yield opened
    opened.close()


def test_wait_times_out_when_nothing_happens(listener: ChangeListener) -> None:
    started = time.monotonic()
    assert listener.wait(0.2) is False
    assert time.monotonic() - started >= 0.15
    assert listener.wait(0) is False


def test_wait_returns_after_another_connection_inserts(
    store: Store, listener: ChangeListener
) -> None:
    other = open_store(store)
    try:
        insert(other, params(delay_seconds=3600))
    finally:
        other.close()
    assert listener.wait(DEADLINE) is True
    assert listener.wait(0.1) is False  # the change was reported once


def test_notices_name_what_changed_where_the_store_can_say(
    store: Store, listener: ChangeListener
) -> None:
    """PostgreSQL's insert notifications carry the earliest run_at of the rows (the tier's
    stager plans its passes by it); SQLite's carry nothing. Both report each change once."""
    insert(store, params(delay_seconds=3600))
    notices = listener.notices(DEADLINE)
    assert notices
    if isinstance(store, SqliteStore):
        assert notices == [""]
    else:
        [payload] = notices
        run_at = notified_run_at(payload)
        assert run_at is not None
        assert run_at - time.time() == pytest.approx(3600, abs=60)
    assert listener.notices(0.1) == []


def test_a_blocked_waiter_is_woken_by_an_insert(store: Store, listener: ChangeListener) -> None:
    waiting = threading.Event()
    outcome: list[bool] = []

    def wait() -> None:
        waiting.set()
        outcome.append(listener.wait(DEADLINE))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert waiting.wait(DEADLINE)
    started = time.monotonic()
    insert(store)
    waiter.join(DEADLINE)
    assert not waiter.is_alive()
    assert outcome == [True]
    assert time.monotonic() - started < DEADLINE / 2


def test_a_job_that_becomes_pending_again_wakes_the_listener(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    listener = store.open_listener()
    try:
        assert store.job_release_many([ref(job)]) == {job_id}
        assert listener.wait(DEADLINE) is True
    finally:
        listener.close()
    assert get(store, job_id).status is JobStatus.PENDING


def test_many_listeners_are_all_woken(store: Store) -> None:
    listeners = [store.open_listener() for _ in range(3)]
    try:
        insert(store)
        assert [listener.wait(DEADLINE) for listener in listeners] == [True, True, True]
    finally:
        for listener in listeners:
            listener.close()


def test_a_commit_in_this_process_is_announced_without_waiting_for_the_poll(
    sqlite_store: SqliteStore,
) -> None:
    """White-box: the in-process announcement, not the 20 ms data_version poll, wakes it."""
    listener = sqlite_store.open_listener()
    try:
        assert not listener._local.is_set()
        insert(sqlite_store)
        assert listener._local.is_set()
        assert listener.wait(0)
        assert not listener._local.is_set()
    finally:
        listener.close()


def test_writes_that_change_nothing_wake_nobody(store: Store, listener: ChangeListener) -> None:
    """An idle worker's empty claims, heartbeats of nothing and empty rescues are no news: if
    they woke the listeners of the process, its idle workers would claim in a tight loop."""
    store.job_claim_with_wakeup(JobClaimParams(["q"], 10, "w1"))
    store.job_heartbeat_many([JobLeaseRef(12345, 1)])
    store.job_rescue_expired(JobRescueParams())
    assert listener.wait(0.1) is False
    insert(store, params())
    assert listener.wait(DEADLINE) is True
