"""Contract: which queues a store knows, and removing a queue's stored settings."""

from __future__ import annotations

from chronoq.core.jobs import Outcome
from chronoq.core.ratelimit import KeyLimit
from chronoq.storage.base import OverviewParams, QueueLimitParams

from .support import Store, claim_one, finish, insert, make_dead, params


def overview_queues(store: Store) -> list[str]:
    return [q.queue for q in store.overview(OverviewParams(window=0.0)).queues]


def test_known_queues_are_those_with_jobs_or_settings(store: Store) -> None:
    assert store.queue_names() == []
    insert(store, params("emails"), params("emails"), params("b"))
    assert finish(store, claim_one(store, queues=["b"]), Outcome.DONE)
    store.queue_pause("paused", True)
    store.key_limit_set("keyed", KeyLimit("host:*", 1.0, 1.0))
    assert store.queue_names() == ["b", "emails", "keyed", "paused"]


def test_removing_a_queue_deletes_its_settings_and_hides_it(store: Store) -> None:
    store.queue_pause("emials", True)
    store.queue_limit(QueueLimitParams("emials", rate=5.0, burst=2.0, concurrency=3))
    store.key_limit_set("emials", KeyLimit("host:*", 1.0, 1.0))
    assert "emials" in overview_queues(store)

    removal = store.queue_remove("emials")
    assert (removal.removed, removal.pending, removal.running) == (True, 0, 0)
    assert store.queue_list() == []
    assert store.queue_names() == []
    assert overview_queues(store) == []
    assert not store.queue_get("emials").paused
    assert store.queue_remove("emials").removed is False  # nothing left to remove


def test_a_queue_with_pending_or_running_jobs_is_not_removed(store: Store) -> None:
    insert(store, params("mail"), params("mail"), params("mail"))
    store.queue_limit(QueueLimitParams("mail", concurrency=3))
    claim_one(store, queues=["mail"])
    removal = store.queue_remove("mail")
    assert (removal.removed, removal.pending, removal.running, removal.busy) == (False, 2, 1, True)
    assert store.queue_get("mail").concurrency == 3


def test_a_queue_with_only_finished_jobs_can_be_removed(store: Store) -> None:
    make_dead(store, params("mail"))
    store.queue_pause("mail", True)
    assert store.queue_remove("mail").removed is True
    assert store.queue_list() == []
    assert store.queue_names() == ["mail"]  # its dead job still names it
