"""Figures the dashboard shows and the API returns, computed from one store overview."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from chronoq.core.jobs import JobStatus
from chronoq.storage.base import (
    FinishedBucket,
    JobStore,
    Overview,
    OverviewParams,
    QueueSettings,
)

RATE_WINDOW = 60.0  # seconds of finished jobs behind the per-minute rates
LATENESS_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation between the closest ranks (None: no values)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def read_overview(store: JobStore, window: float = 300.0, bucket: float = 10.0) -> dict[str, Any]:
    overview = store.overview(OverviewParams(window=window, bucket=bucket))
    return summarize(overview, store.queue_list(), window=window, bucket=bucket)


def summarize(
    overview: Overview, settings: Sequence[QueueSettings], *, window: float, bucket: float
) -> dict[str, Any]:
    """Per-queue rows, a throughput series and a lateness histogram, as JSON-ready values."""
    paused = {queue.name for queue in settings if queue.paused}
    names = sorted({q.queue for q in overview.queues} | {b.queue for b in overview.finished})
    counts = {q.queue: q for q in overview.queues}
    recent_from = overview.db_now - timedelta(seconds=RATE_WINDOW)
    queues = []
    for name in names:
        row = counts.get(name)
        recent = [b for b in overview.finished if b.queue == name and b.start >= recent_from]
        samples = overview.lateness.get(name, [])
        queues.append(
            {
                "queue": name,
                "paused": name in paused,
                "pending": row.pending if row else 0,
                "due": row.due if row else 0,
                "running": row.running if row else 0,
                "dead": row.dead if row else 0,
                "oldest_due_age": row.oldest_due_age if row else 0.0,
                "done_per_minute": _per_minute(recent, JobStatus.DONE),
                "dead_per_minute": _per_minute(recent, JobStatus.DEAD),
                "lateness_p50": quantile(samples, 0.5),
                "lateness_p99": quantile(samples, 0.99),
            }
        )
    return {
        "db_now": overview.db_now.isoformat(),
        "window": window,
        "bucket": bucket,
        "queues": queues,
        "throughput": _throughput(overview, window, bucket),
        "lateness_histogram": _histogram([v for vs in overview.lateness.values() for v in vs]),
    }


def _per_minute(buckets: Sequence[FinishedBucket], status: JobStatus) -> float:
    return sum(b.count for b in buckets if b.status == status) * 60.0 / RATE_WINDOW


def _throughput(overview: Overview, window: float, bucket: float) -> list[dict[str, Any]]:
    """One point per bucket of the window, empty ones included, so a chart's x axis is even."""
    end = math.floor(overview.db_now.timestamp() / bucket) * bucket
    steps = max(1, math.ceil(window / bucket))
    points: dict[float, dict[str, Any]] = {}
    for n in range(steps - 1, -1, -1):
        start = end - n * bucket
        points[start] = {"start": start, "done": 0, "dead": 0, "other": 0}
    for b in overview.finished:
        point = points.get(math.floor(b.start.timestamp() / bucket) * bucket)
        if point is not None:
            kind = str(b.status) if b.status in (JobStatus.DONE, JobStatus.DEAD) else "other"
            point[kind] += b.count
    return list(points.values())


def _histogram(values: Sequence[float]) -> list[dict[str, Any]]:
    """Counts per lateness bucket (upper bound `le` in seconds; None: beyond the last)."""
    counts = [0] * (len(LATENESS_BOUNDS) + 1)
    for value in values:
        index = next((i for i, bound in enumerate(LATENESS_BOUNDS) if value <= bound), None)
        counts[len(LATENESS_BOUNDS) if index is None else index] += 1
    bounds: list[float | None] = [*LATENESS_BOUNDS, None]
    return [{"le": le, "count": c} for le, c in zip(bounds, counts, strict=True)]
