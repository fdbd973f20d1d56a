"""Prometheus metrics of the worker, the scheduler and the enqueue API (table: docs/metrics.md).

```python
metrics = Metrics()                 # a registry of its own, not prometheus_client's global one
app.metrics = metrics               # enqueues, workers and schedulers of this app count on it
                                    # (an observer of their events: chronoq.observability.events)
metrics.watch_store(lambda: app.store)   # queue depths read at scrape time (the scheduler's)
metrics.serve(9464)                 # /metrics in a thread; or metrics.render() in your server
```

Each process counts what it does itself: counters start at zero with the process, and
Prometheus sums them across processes. The per-job cost is a dict lookup and a few increments:
the labelled children of a (queue, task) are resolved once and kept.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST, start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from chronoq.core.jobs import Job, Outcome
from chronoq.errors import ConfigError, StoreError
from chronoq.fleet.records import Fleet
from chronoq.fleet.view import kind_totals
from chronoq.observability.events import (
    AttemptsEnded,
    HandlerReturned,
    JobsClaimed,
    JobsEnqueued,
    LeaderChanged,
    LeaseLost,
    LeasesRescued,
    Subscription,
    TicksFired,
    WriteFenced,
)
from chronoq.observability.recent import RecentFinished
from chronoq.observability.tiercounters import TierCounters
from chronoq.storage.base import Overview, ProcessListParams, ScheduleAdvance

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from chronoq.storage.base import JobStore

log = logging.getLogger("chronoq.metrics")
_K = TypeVar("_K")

# Due→start and handler seconds: from a worker keeping up (a few ms) to a backlog or a long job.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
# How far back the store collector counts finished jobs.
STORE_WINDOW = 60.0
FENCED_KINDS = ("finish", "heartbeat")
LEASE_SOURCES = ("rescuer", "worker")
JOB_LABELS = ("queue", "task")


@dataclass(frozen=True, slots=True)
class JobCounters:
    """The counters of one (queue, task), resolved once (`.labels()` takes a lock per call)."""

    enqueued: Counter
    claimed: Counter
    skipped: Counter
    finished: dict[Outcome, Counter]


@dataclass(frozen=True, slots=True)
class QueueTimers:
    """The histograms of one queue."""

    lateness: Histogram
    run: Histogram


class Metrics:
    """Every chronoq metric, in `registry`. Worker, Scheduler and App take one (or None)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._declare_job_metrics()
        self._declare_fleet_metrics()
        self.tier = TierCounters(self.registry)
        self._jobs: dict[tuple[str, str], JobCounters] = {}
        self._queues: dict[str, QueueTimers] = {}
        self._fenced = {kind: self.fencing_rejections.labels(kind) for kind in FENCED_KINDS}
        self._expired = {source: self.lease_expiries.labels(source) for source in LEASE_SOURCES}
        self._server: WSGIServer | None = None
        self._server_thread: threading.Thread | None = None
        # Attempts (id, token) whose lost lease a refused heartbeat counted: their refused
        # result then does not count it again.
        self._lost_counted: set[tuple[int, int]] = set()

    def _declare_job_metrics(self) -> None:
        def counter(name: str, text: str) -> Counter:
            return Counter(f"chronoq_jobs_{name}", text, JOB_LABELS, registry=self.registry)

        self.jobs_enqueued = counter("enqueued", "Jobs created by App.enqueue and its variants.")
        self.jobs_claimed = counter("claimed", "Attempts claimed by this process.")
        self.jobs_completed = counter("completed", "Attempts that ended done.")
        self.jobs_retried = counter("retried", "Attempts that failed and will run again.")
        self.jobs_dead = counter("dead", "Attempts that failed for the last time (job dead).")
        self.jobs_cancelled = counter("cancelled", "Attempts that discarded their job.")
        # Late "skip" jobs are ended by the claim statement, inside the database: no worker
        # ever holds one, so this stays 0 in workers. chronoq_queue_finished_recent counts them.
        self.jobs_skipped = counter(
            "skipped",
            "Jobs a worker ended skipped: 0, the claim skips them in the database (see "
            "chronoq_queue_finished_recent).",
        )
        self.job_lateness = self._histogram(
            "chronoq_job_lateness_seconds", "Due to start: started_at - run_at, database clock."
        )
        self.job_run = self._histogram("chronoq_job_run_seconds", "Handler run time.")

    def _histogram(self, name: str, text: str) -> Histogram:
        return Histogram(name, text, ("queue",), registry=self.registry, buckets=DURATION_BUCKETS)

    def _declare_fleet_metrics(self) -> None:
        r = self.registry
        self.lease_expiries = Counter(
            "chronoq_lease_expiries",
            "Leases that ran out: jobs the rescuer requeued or killed, leases a worker lost.",
            ("source",),
            registry=r,
        )
        self.fencing_rejections = Counter(
            "chronoq_fencing_rejections",
            "Worker writes refused because their lease token was stale.",
            ("kind",),
            registry=r,
        )
        self.leader_changes = Counter(
            "chronoq_leader_changes",
            "Times this process was elected or deposed.",
            ("duty",),
            registry=r,
        )
        self.leader = Gauge(
            "chronoq_leader", "1 while this process holds the duty.", ("duty",), registry=r
        )
        schedule = ("schedule",)
        self.schedule_fires = Counter(
            "chronoq_schedule_fires", "Tick jobs inserted.", schedule, registry=r
        )
        self.schedule_late_ticks = Counter(
            "chronoq_schedule_late_ticks",
            "Ticks fired later than their instant.",
            schedule,
            registry=r,
        )
        self.schedule_skipped_ticks = Counter(
            "chronoq_schedule_skipped_ticks",
            "Missed ticks dropped by the misfire policy.",
            schedule,
            registry=r,
        )

    # -- as an observer -------------------------------------------------------------------

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        """What the metrics count of the events of a worker, a scheduler or an app."""
        return (
            Subscription(JobsEnqueued, lambda e: self.enqueued(e.queue, e.task, e.count)),
            Subscription(JobsClaimed, lambda e: self.claimed(e.jobs)),
            Subscription(HandlerReturned, lambda e: self.ran(e.job.queue, e.seconds)),
            Subscription(AttemptsEnded, self._attempts_ended),
            Subscription(LeaseLost, self._lease_lost),
            Subscription(WriteFenced, lambda e: self.fenced(e.kind)),
            Subscription(
                LeasesRescued,
                lambda e: self.lease_expired("rescuer", len(e.requeued) + len(e.dead)),
            ),
            Subscription(
                LeaderChanged, lambda e: self.leader_changed(e.duty, leading=e.term is not None)
            ),
            Subscription(TicksFired, lambda e: self.schedule_advanced(e.schedule, e.advance)),
            *self.tier.subscriptions(),
        )

    def _attempts_ended(self, event: AttemptsEnded) -> None:
        self.finished_many((e.job, e.outcome) for e in event.ends if e.accepted)
        for end in event.ends:
            if not end.accepted:
                self._count_lost(end.job, "finish")

    def _lease_lost(self, event: LeaseLost) -> None:
        self._count_lost(event.job, "heartbeat")

    def _count_lost(self, job: Job, kind: str) -> None:
        """A write of a worker was refused: count it, and the lost lease once per attempt (a
        refused heartbeat comes first; the refused result of the same attempt follows)."""
        self.fenced(kind)
        attempt = (job.id, job.lease_token)
        if kind == "heartbeat":
            self._lost_counted.add(attempt)
            self.lease_expired("worker")
        elif attempt in self._lost_counted:
            self._lost_counted.discard(attempt)
        else:
            self.lease_expired("worker")

    # -- per job (the worker's and the enqueue API's hot paths) ----------------------------

    def job_counters(self, queue: str, task: str) -> JobCounters:
        counters = self._jobs.get((queue, task))
        if counters is None:
            # Two threads may build the same one: labels() returns the same children to both.
            counters = self._jobs.setdefault((queue, task), self._job_counters(queue, task))
        return counters

    def _job_counters(self, queue: str, task: str) -> JobCounters:
        return JobCounters(
            enqueued=self.jobs_enqueued.labels(queue, task),
            claimed=self.jobs_claimed.labels(queue, task),
            skipped=self.jobs_skipped.labels(queue, task),
            finished={
                Outcome.DONE: self.jobs_completed.labels(queue, task),
                Outcome.RETRY: self.jobs_retried.labels(queue, task),
                Outcome.DEAD: self.jobs_dead.labels(queue, task),
                Outcome.CANCELLED: self.jobs_cancelled.labels(queue, task),
            },
        )

    def queue_timers(self, queue: str) -> QueueTimers:
        timers = self._queues.get(queue)
        if timers is None:
            made = QueueTimers(self.job_lateness.labels(queue), self.job_run.labels(queue))
            timers = self._queues.setdefault(queue, made)
        return timers

    def enqueued(self, queue: str, task: str, count: int = 1) -> None:
        self.job_counters(queue, task).enqueued.inc(count)

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Count claimed jobs and observe how late each started (both instants are the
        database's, so worker clock skew does not enter)."""
        for (queue, task), count in _grouped((job.queue, job.task) for job in jobs).items():
            self.job_counters(queue, task).claimed.inc(count)
        for job in jobs:
            if job.started_at is not None:
                late = (job.started_at - job.run_at).total_seconds()
                self.queue_timers(job.queue).lateness.observe(max(0.0, late))

    def ran(self, queue: str, seconds: float) -> None:
        self.queue_timers(queue).run.observe(seconds)

    def finished(self, job: Job, outcome: Outcome) -> None:
        """An attempt's end, as the store accepted it."""
        self.job_counters(job.queue, job.task).finished[outcome].inc()

    def finished_many(self, ends: Iterable[tuple[Job, Outcome]]) -> None:
        """The ends of a batch of attempts the store accepted, one increment per kind."""
        grouped = _grouped((job.queue, job.task, outcome) for job, outcome in ends)
        for (queue, task, outcome), count in grouped.items():
            self.job_counters(queue, task).finished[outcome].inc(count)

    def fenced(self, kind: str) -> None:
        """A write named a stale lease token: `finish` (a result, or complete_in) or
        `heartbeat`."""
        self._fenced[kind].inc()

    def lease_expired(self, source: str, count: int = 1) -> None:
        """`rescuer`: jobs a rescue pass requeued or killed; `worker`: a lease a worker found
        it had lost (once per attempt)."""
        if count:
            self._expired[source].inc(count)

    # -- the scheduler --------------------------------------------------------------------

    def leader_changed(self, duty: str, *, leading: bool) -> None:
        self.leader_changes.labels(duty).inc()
        self.leader.labels(duty).set(1 if leading else 0)

    def schedule_advanced(self, name: str, advance: ScheduleAdvance) -> None:
        """One cron pass over a schedule: ticks inserted, fired late, dropped."""
        if advance.inserted:
            self.schedule_fires.labels(name).inc(advance.inserted)
        if advance.late:
            self.schedule_late_ticks.labels(name).inc(advance.late)
        if advance.skipped:
            self.schedule_skipped_ticks.labels(name).inc(advance.skipped)

    def watch_store(self, store: Callable[[], JobStore]) -> StoreCollector:
        """Expose queue depths read from `store()` at each scrape (see StoreCollector)."""
        collector = StoreCollector(store)
        self.registry.register(collector)
        return collector

    def watch_tier(self, statuses: Callable[[], list[Any]]) -> Collector:
        """Deprecated: `chronoq.tier.metrics.watch(metrics, statuses)`, the tier's own."""
        warnings.warn(
            "Metrics.watch_tier is deprecated; use chronoq.tier.metrics.watch(metrics, statuses)",
            DeprecationWarning,
            stacklevel=2,
        )
        from chronoq.tier.metrics import watch

        return watch(self, statuses)

    # -- exposition -----------------------------------------------------------------------

    def render(self) -> bytes:
        """The registry in Prometheus' text format (serve it with `content_type`)."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve /metrics on `host:port` from a daemon thread; returns the port bound (`port`
        0 picks a free one)."""
        if self._server is not None:
            raise ConfigError("the metrics server is already running")
        try:
            server, thread = start_http_server(port, host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self._server, self._server_thread = server, thread
        bound: int = server.server_port
        return bound

    def close(self) -> None:
        """Stop the metrics server, if one runs."""
        server, thread = self._server, self._server_thread
        self._server = self._server_thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)


class StoreCollector:
    """Gauges read from the store at scrape time: queue depths, the oldest due job's age, jobs
    finished in the last minute by status (the only count of `skipped` jobs, which the
    database ends on its own), and the live processes of the fleet registry per kind. A scrape
    never raises: when the store fails it reports `chronoq_store_up 0`, and the failure is
    logged once until the store answers again."""

    def __init__(self, store: Callable[[], JobStore], window: float = STORE_WINDOW) -> None:
        self._store = store
        self._window = window
        self._recent = RecentFinished(window, window / 6)
        self._lock = threading.Lock()
        self._failing = False

    def describe(self) -> Iterable[Metric]:
        return [*_store_families(None, self._window), *_fleet_families(None), _up(0)]

    def collect(self) -> Iterable[Metric]:
        read = self._read()
        if read is None:
            return [_up(0)]
        overview, fleet = read
        return [*_store_families(overview, self._window), *_fleet_families(fleet), _up(1)]

    def _read(self) -> tuple[Overview, Fleet] | None:
        try:
            store = self._store()
            overview = self._recent.read(store)
            fleet = store.process_list(ProcessListParams())
        except Exception as exc:  # a scrape must not fail; the gauge says the store did
            self._failed(exc)
            return None
        with self._lock:
            if self._failing:
                log.info("the store answers again", extra={"action": "metrics.store_up"})
            self._failing = False
        return overview, fleet

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            first, self._failing = not self._failing, True
        if first:
            log.error(
                "cannot read queue metrics from the store: %s",
                exc,
                # A store error is an outage to report; anything else is a bug to locate.
                exc_info=None if isinstance(exc, StoreError) else exc,
                extra={"action": "metrics.store_down"},
            )


def _grouped(keys: Iterable[_K]) -> dict[_K, int]:
    """How many times each key occurs: a batch then costs one increment per kind of job (an
    increment takes a lock), not one per job."""
    counts: dict[_K, int] = defaultdict(int)
    for key in keys:
        counts[key] += 1
    return counts


def _up(value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "chronoq_store_up", "1 when the last scrape could read the store.", value=value
    )


def _store_families(overview: Overview | None, window: float) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "chronoq_queue_depth",
        "Jobs per queue and state (pending includes due).",
        labels=("queue", "state"),
    )
    oldest = GaugeMetricFamily(
        "chronoq_queue_oldest_due_age_seconds",
        "How long the oldest due job of the queue has waited (0: none due).",
        labels=("queue",),
    )
    recent = GaugeMetricFamily(
        "chronoq_queue_finished_recent",
        f"Jobs that ended in the last {window:g}s (counted in {window / 6:g}s buckets, so up "
        f"to {window * 7 / 6:g}s), by final status.",
        labels=("queue", "status"),
    )
    if overview is not None:
        for queue in overview.queues:
            for state in ("pending", "due", "running", "dead"):
                depth.add_metric((queue.queue, state), getattr(queue, state))
            oldest.add_metric((queue.queue,), queue.oldest_due_age)
        for (queue_name, status), count in _finished_counts(overview).items():
            recent.add_metric((queue_name, status), count)
    yield from (depth, oldest, recent)


def _fleet_families(fleet: Fleet | None) -> Iterator[Metric]:
    """The live processes per kind (every kind, 0 when none runs: an alert can say "no
    scheduler"), the jobs they run now and their slots."""
    families = {
        "processes": GaugeMetricFamily(
            "chronoq_processes",
            "Live processes of the fleet registry, by kind (worker, scheduler, server).",
            labels=("kind",),
        ),
        "running": GaugeMetricFamily(
            "chronoq_process_running_jobs",
            "Jobs the live processes of the kind run now, as their last refresh said.",
            labels=("kind",),
        ),
        "concurrency": GaugeMetricFamily(
            "chronoq_process_concurrency",
            "Job slots of the live processes of the kind (workers' concurrency).",
            labels=("kind",),
        ),
    }
    if fleet is not None:
        for kind, totals in kind_totals(fleet).items():
            families["processes"].add_metric((kind,), totals.processes)
            families["running"].add_metric((kind,), totals.running)
            families["concurrency"].add_metric((kind,), totals.concurrency)
    yield from families.values()


def _finished_counts(overview: Overview) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for bucket in overview.finished:
        counts[(bucket.queue, str(bucket.status))] += bucket.count
    return dict(sorted(counts.items()))
