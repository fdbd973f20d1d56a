"""The tier's metrics read from Redis at scrape time: staged and due timers, stream length and
lag per partition, so any process that can reach Redis reports them for every partition, led or
not. The counters of what leaders did (staged, moved, refused, reconciled) are counted from
events in every `Metrics` (`chronoq.observability.tiercounters`); `watch` adds this collector.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from chronoq.errors import ChronoqError
from chronoq.tier.ports import PartitionStatus

if TYPE_CHECKING:
    from chronoq.observability.metrics import Metrics

log = logging.getLogger("chronoq.metrics")
PARTITION = ("partition",)


def watch(metrics: Metrics, statuses: Callable[[], list[PartitionStatus]]) -> TierCollector:
    """Expose the tier's per-partition state, read by `statuses()` at each scrape, in `metrics`."""
    collector = TierCollector(statuses)
    metrics.registry.register(collector)
    return collector


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
