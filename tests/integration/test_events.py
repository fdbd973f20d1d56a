"""Workers, schedulers and enqueues say what happened once, to every observer."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

import chronoq
import chronoq.testing
from chronoq.core.jobs import Outcome
from chronoq.observability import events as ev
from chronoq.observability.metrics import Metrics
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.testing import StaticElector
from tests.helpers import wait_until

WORKER_EVENTS = (
    ev.WorkerStarted,
    ev.WorkerStopped,
    ev.JobsClaimed,
    ev.JobsStarted,
    ev.HandlerReturned,
    ev.AttemptsEnded,
    ev.WorkerIdle,
    ev.JobsReleased,
    ev.LeaseLost,
    ev.LeasesRescued,
)


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    with chronoq.App(dsn) as application:
        yield application


class Everything:
    def __init__(self, kinds: Iterable[type[ev.Event]]) -> None:
        self.kinds = tuple(kinds)
        self.seen: list[ev.Event] = []
        self.lock = threading.Lock()

    def subscriptions(self) -> Iterable[ev.Subscription[Any]]:
        return [ev.Subscription(kind, self.record) for kind in self.kinds]

    def record(self, event: ev.Event) -> None:
        with self.lock:
            self.seen.append(event)

    def of(self, kind: type[ev.Event]) -> list[Any]:
        with self.lock:
            return [event for event in self.seen if type(event) is kind]


def test_each_step_of_a_burst_is_one_event(app: chronoq.App) -> None:
    @app.task
    def fine() -> None:
        pass

    @app.task(max_attempts=1)
    def broken() -> None:
        raise ValueError("no")

    fine.defer()
    fine.defer()
    broken.defer()
    seen = Everything(WORKER_EVENTS)
    worker = chronoq.Worker(app, chronoq.WorkerOptions(burst=True), [seen])
    stats = worker.run(install_signal_handlers=False)

    assert len(seen.of(ev.WorkerStarted)) == 1 and len(seen.of(ev.WorkerStopped)) == 1
    claimed = [job.id for event in seen.of(ev.JobsClaimed) for job in event.jobs]
    started = [job.id for event in seen.of(ev.JobsStarted) for job in event.jobs]
    returned = [event.job.id for event in seen.of(ev.HandlerReturned)]
    ends = [end for event in seen.of(ev.AttemptsEnded) for end in event.ends]
    assert sorted(claimed) == sorted(started) == sorted(returned) == [1, 2, 3]
    assert Counter(end.outcome for end in ends) == {Outcome.DONE: 2, Outcome.DEAD: 1}
    assert all(end.accepted for end in ends)
    [dead] = [end for end in ends if end.outcome == Outcome.DEAD]
    assert dead.error is not None and dead.error["error"] == "ValueError"
    assert seen.of(ev.WorkerIdle)
    assert (stats.claimed, stats.done, stats.dead) == (3, 2, 1)


def test_the_apps_observers_hear_its_workers_and_its_enqueues(app: chronoq.App) -> None:
    @app.task
    def fine() -> None:
        pass

    app_wide = Everything((ev.JobsEnqueued, ev.AttemptsEnded))
    app.observers.subscribe(app_wide)
    fine.defer()
    app.enqueue_many([chronoq.JobSpec("fine"), chronoq.JobSpec("fine")])
    chronoq.testing.drain(app)
    enqueued = sum(event.count for event in app_wide.of(ev.JobsEnqueued))
    ended = sum(len(event.ends) for event in app_wide.of(ev.AttemptsEnded))
    assert (enqueued, ended) == (3, 3)


def test_metrics_set_on_the_app_count_once_per_event(app: chronoq.App) -> None:
    @app.task
    def fine() -> None:
        pass

    app.metrics = Metrics()
    fine.defer()
    chronoq.testing.drain(app)
    text = app.metrics.render().decode()
    assert 'chronoq_jobs_completed_total{queue="default",task="fine"} 1.0' in text
    assert 'chronoq_jobs_claimed_total{queue="default",task="fine"} 1.0' in text


def test_a_schedulers_leadership_is_one_event_each_way(app: chronoq.App) -> None:
    seen = Everything((ev.LeaderChanged, ev.ServiceRan))
    options = SchedulerOptions(election_interval=0.05, leader_ttl=1.0)
    scheduler = Scheduler(app, options, elector=StaticElector(), observers=[seen])
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        wait_until(lambda: {e.service for e in seen.of(ev.ServiceRan)} >= {"cron", "rescuer"})
    finally:
        scheduler.request_stop()
        thread.join(10)
    changes = seen.of(ev.LeaderChanged)
    assert [change.term is not None for change in changes] == [True, False]
    assert changes[1].graceful and changes[1].why == "stopped"


def test_a_streamed_enqueue_counts_what_it_created_by_queue_and_task(app: chronoq.App) -> None:
    @app.task(name="one")
    def one() -> None:
        pass

    @app.task(name="two", queue="other")
    def two() -> None:
        pass

    app_wide = Everything((ev.JobsEnqueued,))
    app.observers.subscribe(app_wide)
    app.enqueue("one", key="held")
    keyless = (chronoq.JobSpec("two" if n % 3 == 0 else "one") for n in range(200))
    keyed = [chronoq.JobSpec("one", key="held"), chronoq.JobSpec("two", key="new")]
    results = app.enqueue_many(itertools.chain(keyless, keyed))
    assert [result.created for result in results[-2:]] == [False, True]
    counts: Counter[tuple[str, str]] = Counter()
    for event in app_wide.of(ev.JobsEnqueued):
        counts[event.queue, event.task] += event.count
    assert counts == {("default", "one"): 1 + 133, ("other", "two"): 67 + 1}
