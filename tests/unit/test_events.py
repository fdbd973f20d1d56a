"""The observer list: each event goes once to each observer that subscribed to its kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from chronoq.observability.events import (
    Event,
    JobsEnqueued,
    JobsPruned,
    Observers,
    ServiceRan,
    Subscription,
)


class Recorder:
    def __init__(self, *kinds: type[Event]) -> None:
        self.kinds = kinds
        self.seen: list[Event] = []

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return [Subscription(kind, self.seen.append) for kind in self.kinds]


def test_an_event_reaches_only_the_observers_of_its_kind() -> None:
    pruning, enqueues = Recorder(JobsPruned), Recorder(JobsEnqueued, JobsPruned)
    events = Observers([pruning, enqueues])
    enqueued = JobsEnqueued("default", "send", 3)
    pruned = JobsPruned(10, "7 days")
    events.emit(enqueued)
    events.emit(pruned)
    assert pruning.seen == [pruned]
    assert enqueues.seen == [enqueued, pruned]


def test_what_a_list_emits_reaches_its_parent_after_its_own_observers() -> None:
    order: list[str] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def subscriptions(self) -> Iterable[Subscription[Any]]:
            return [Subscription(ServiceRan, lambda event: order.append(self.name))]

    app_wide = Observers([Named("app")])
    worker = Observers([Named("worker")], parent=app_wide)
    worker.emit(ServiceRan("cron"))
    app_wide.emit(ServiceRan("cron"))
    assert order == ["worker", "app", "app"]


def test_wants_says_whether_anybody_listens_here_or_above() -> None:
    app_wide = Observers()
    worker = Observers(parent=app_wide)
    assert not worker.wants(JobsEnqueued)
    app_wide.subscribe(Recorder(JobsEnqueued))
    assert worker.wants(JobsEnqueued) and not worker.wants(JobsPruned)


def test_an_unsubscribed_observer_hears_nothing_more() -> None:
    kept, dropped = Recorder(ServiceRan), Recorder(ServiceRan)
    events = Observers([kept, dropped])
    events.unsubscribe(dropped)
    events.emit(ServiceRan("pruner"))
    assert len(kept.seen) == 1 and dropped.seen == []
    assert list(events) == [kept]


def test_an_observer_that_raises_stops_the_emitter() -> None:
    """A broken observer is a bug in the process: it surfaces where the event was emitted."""

    class Broken:
        def subscriptions(self) -> Iterable[Subscription[Any]]:
            return [Subscription(ServiceRan, self.fail)]

        def fail(self, event: ServiceRan) -> None:
            raise RuntimeError("observer exploded")

    after = Recorder(ServiceRan)
    events = Observers([Broken(), after])
    with pytest.raises(RuntimeError, match="observer exploded"):
        events.emit(ServiceRan("cron"))
    assert after.seen == []


def test_a_subclass_of_an_event_is_not_its_parent_kind() -> None:
    """Dispatch is by the exact type: one dict look-up per emit, whatever the observers."""

    class Special(JobsPruned):
        __slots__ = ()

    seen = Recorder(JobsPruned)
    Observers([seen]).emit(Special(1, "1 day"))
    assert seen.seen == []


def test_an_observer_subscribed_above_after_an_emit_hears_the_next_one() -> None:
    """Routes are gathered at the first emit of a kind; a later subscription, here or in the
    parent, changes them, and an unsubscription too."""
    app_wide = Observers()
    worker = Observers(parent=app_wide)
    worker.emit(ServiceRan("cron"))
    late_above, late_here = Recorder(ServiceRan), Recorder(ServiceRan)
    app_wide.subscribe(late_above)
    worker.subscribe(late_here)
    pruner, rescuer = ServiceRan("pruner"), ServiceRan("rescuer")
    worker.emit(pruner)
    app_wide.unsubscribe(late_above)
    worker.emit(rescuer)
    assert late_here.seen == [pruner, rescuer]
    assert late_above.seen == [pruner]
