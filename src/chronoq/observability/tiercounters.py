"""The counters of the scale-out tier, per partition (part of `Metrics`; docs/metrics.md).

Counted from the events a partition leader emits, in the scheduler process that leads: timers
staged and moved, moves the epoch fence refused, reconciles after Redis lost a partition, leader
changes. They are declared in every registry, as the job counters are, so the names a dashboard
queries do not depend on the dispatch mode; what is read from Redis at scrape time is the tier's
own collector (`chronoq.tier.metrics`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from chronoq.observability.events import (
    MoveRefused,
    PartitionLeaderChanged,
    PartitionReconciled,
    Subscription,
    TimersMoved,
    TimersStaged,
)

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
