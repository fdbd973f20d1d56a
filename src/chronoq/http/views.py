"""Figures the dashboard shows and the API returns, computed from one store overview."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from chronoq.core.jobs import JobStatus
from chronoq.observability.recent import RecentFinished
from chronoq.storage.base import (
    LATENESS_BOUNDS,
    FinishedBucket,
    JobStore,
    Overview,
    QueueCounts,
    QueueSettings,
)

RATE_WINDOW = 60.0  # seconds of finished jobs behind the per-minute rates


def histogram_quantile(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile of lateness counts per `LATENESS_BOUNDS` bucket (and one past the last),
    interpolated linearly inside its bucket as Prometheus' histogram_quantile does; a quantile
    in the last bucket is reported as the last bound. None: no jobs."""
    total = sum(counts)
    if not total:
        return None
    rank, seen = q * total, 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            if index >= len(LATENESS_BOUNDS):
                return LATENESS_BOUNDS[-1]
            low = LATENESS_BOUNDS[index - 1] if index else 0.0
            return low + (LATENESS_BOUNDS[index] - low) * (rank - seen) / count
        seen += count
    return LATENESS_BOUNDS[-1]


def read_overview(
    recent: RecentFinished, store: JobStore, settings: Sequence[QueueSettings] | None = None
) -> dict[str, Any]:
    """The dashboard's figures, read through `recent`: only the newest buckets are read again."""
    overview = recent.read(store)
    queues = store.queue_list() if settings is None else settings
    return summarize(overview, queues, window=recent.window, bucket=recent.bucket)


def summarize(
    overview: Overview, settings: Sequence[QueueSettings], *, window: float, bucket: float
) -> dict[str, Any]:
    """Per-queue rows, a throughput series and a lateness histogram, as JSON-ready values."""
    paused = {queue.name for queue in settings if queue.paused}
    names = sorted({q.queue for q in overview.queues} | {b.queue for b in overview.finished})
    counts = {q.queue: q for q in overview.queues}
    recent_from = overview.db_now - timedelta(seconds=RATE_WINDOW)
    queues = [
        _queue_row(
            counts.get(name) or QueueCounts(name),  # a queue with finished jobs only
            [b for b in overview.finished if b.queue == name],
            recent_from,
            paused=name in paused,
        )
        for name in names
    ]
    return {
        "db_now": overview.db_now.isoformat(),
        "window": window,
        "bucket": bucket,
        "queues": queues,
        "throughput": _throughput(overview, window, bucket),
        "lateness_histogram": _histogram(_lateness_counts(overview.finished)),
    }


def _queue_row(
    row: QueueCounts, finished: Sequence[FinishedBucket], recent_from: datetime, *, paused: bool
) -> dict[str, Any]:
    recent = [b for b in finished if b.start >= recent_from]
    lateness = _lateness_counts(finished)
    return {
        "queue": row.queue,
        "paused": paused,
        "pending": row.pending,
        "due": row.due,
        "running": row.running,
        "dead": row.dead,
        "oldest_due_age": row.oldest_due_age,
        "done_per_minute": _per_minute(recent, JobStatus.DONE),
        "dead_per_minute": _per_minute(recent, JobStatus.DEAD),
        "lateness_p50": histogram_quantile(lateness, 0.5),
        "lateness_p99": histogram_quantile(lateness, 0.99),
    }


def _lateness_counts(buckets: Sequence[FinishedBucket]) -> list[int]:
    counts = [0] * (len(LATENESS_BOUNDS) + 1)
    for bucket in buckets:
        for index, count in enumerate(bucket.lateness):
            counts[index] += count
    return counts


def _per_minute(buckets: Sequence[FinishedBucket], status: JobStatus) -> float:
    """Jobs per minute over the buckets that began in the last minute (they may cover up to
    one bucket less: the current one is still filling)."""
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


def _histogram(counts: Sequence[int]) -> list[dict[str, Any]]:
    """Done jobs per lateness bucket (`le`: its upper bound in seconds; None: past the last)."""
    bounds: list[float | None] = [*LATENESS_BOUNDS, None]
    return [{"le": le, "count": c} for le, c in zip(bounds, counts, strict=True)]
