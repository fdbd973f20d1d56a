"""The metrics of the scale-out tier, per partition (part of `Metrics`; docs/metrics.md).

Counted where the work happens, in the scheduler process that leads a partition: timers staged
and moved, moves the epoch fence refused, reconciles after Redis lost a partition, leader changes.
Stream lag and staged timers are read from Redis at scrape time (`TierCollector`), so any process
that can reach Redis reports them for every partition, led or not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from chronoq.dispatch.ports import PartitionStatus
from chronoq.errors import ChronoqError
from chronoq.observability.events import (
    MoveRefused,
    PartitionLeaderChanged,
    PartitionReconciled,
    Subscription,
    TimersMoved,
    TimersStaged,
)

log = logging.getLogger("chronoq.metrics")
PARTITION = ("partition",)
# Move lateness: the goal is a few milliseconds; a failover costs a TTL.
MOVE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class TierCounters:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, text: str, labels: tuple[str, ...] = PARTITION) -> Counter:
            return Counter(f"chronoq_tier_{name}", text, labels, registry=registry)

        self.staged = counter("timers_staged", "Timers copied from PostgreSQL into Redis.")
        self.moved = counter("timers_moved", "Timers moved onto their queues' streams.")
        self.refused = counter(
            "moves_refused",
            "Fenced writes Redis refused: stale (a newer epoch leads) or lost (Redis lost data).",
            ("partition", "why"),
        )
        self.reconciles = counter("reconciles", "Partitions re-staged after Redis lost them.")
        self.leader_changes = counter(
            "leader_changes", "Times this process began or stopped leading."
        )
        self.leading = Gauge(
            "chronoq_tier_leading",
            "1 while this process leads the partition.",
            PARTITION,
            registry=registry,
        )
        self.move_lateness = Histogram(
            "chronoq_tier_move_lateness_seconds",
            "Database clock at the move minus the earliest due timer it moved.",
            PARTITION,
            registry=registry,
            buckets=MOVE_BUCKETS,
        )
        self.reconcile_seconds = Histogram(
            "chronoq_tier_reconcile_seconds",
            "From noticing Redis lost a partition to its horizon staged again.",
            registry=registry,
            buckets=MOVE_BUCKETS,
        )

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(TimersStaged, self._staged),
            Subscription(TimersMoved, self._moved),
            Subscription(MoveRefused, self._refused),
            Subscription(PartitionReconciled, self._reconciled),
            Subscription(PartitionLeaderChanged, self._leader_changed),
        )

    def _staged(self, event: TimersStaged) -> None:
        self.staged.labels(str(event.partition)).inc(event.count)

    def _moved(self, event: TimersMoved) -> None:
        partition = str(event.partition)
        self.moved.labels(partition).inc(event.count)
        self.move_lateness.labels(partition).observe(event.late)

    def _refused(self, event: MoveRefused) -> None:
        self.refused.labels(str(event.partition), event.why).inc()

    def _reconciled(self, event: PartitionReconciled) -> None:
        self.reconciles.labels(str(event.partition)).inc()
        self.reconcile_seconds.observe(event.seconds)

    def _leader_changed(self, event: PartitionLeaderChanged) -> None:
        partition = str(event.partition)
        self.leader_changes.labels(partition).inc()
        self.leading.labels(partition).set(0 if event.epoch is None else 1)


class TierCollector:
    """Per-partition gauges read from Redis at scrape time: staged timers, due timers, stream
    length and consumer-group lag. A scrape that cannot reach Redis reports `chronoq_tier_up 0`."""

    def __init__(self, statuses: Callable[[], list[PartitionStatus]]) -> None:
        self._statuses = statuses

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("chronoq_tier_up", "1 when the scrape could read Redis.")
        try:
            statuses = self._statuses()
        except ChronoqError as exc:
            log.warning("cannot read the tier's state from Redis: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        families = {
            "staged": GaugeMetricFamily(
                "chronoq_tier_staged", "Timers staged in Redis.", labels=PARTITION
            ),
            "due": GaugeMetricFamily(
                "chronoq_tier_due", "Staged timers already due (not yet moved).", labels=PARTITION
            ),
            "stream_length": GaugeMetricFamily(
                "chronoq_tier_stream_length",
                "Entries in the partition's streams.",
                labels=PARTITION,
            ),
            "stream_lag": GaugeMetricFamily(
                "chronoq_tier_stream_lag", "Entries not yet read by any worker.", labels=PARTITION
            ),
        }
        for status in statuses:
            for name, family in families.items():
                family.add_metric([str(status.partition)], getattr(status, name))
        yield from families.values()
