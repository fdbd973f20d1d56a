"""The dashboard's figures from lateness histograms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chronoq.core.jobs import JobStatus
from chronoq.http.views import histogram_quantile, summarize
from chronoq.storage.base import (
    LATENESS_BOUNDS,
    FinishedBucket,
    Overview,
    QueueCounts,
    QueueSettings,
)

EMPTY = [0] * (len(LATENESS_BOUNDS) + 1)


def _counts(**at_bound: int) -> list[int]:
    counts = list(EMPTY)
    for bound, count in at_bound.items():
        counts[LATENESS_BOUNDS.index(float(bound.removeprefix("b").replace("_", ".")))] = count
    return counts


def test_no_jobs_no_quantile() -> None:
    assert histogram_quantile(EMPTY, 0.5) is None


def test_quantiles_interpolate_inside_their_bucket() -> None:
    # 100 jobs between 0.5 s and 1 s: the median is half way, p99 near the top.
    counts = _counts(b1_0=100)
    assert histogram_quantile(counts, 0.5) == pytest.approx(0.75)
    assert histogram_quantile(counts, 0.99) == pytest.approx(0.995)


def test_quantiles_find_their_bucket() -> None:
    counts = _counts(b0_005=90, b10_0=10)
    assert histogram_quantile(counts, 0.5) == pytest.approx(0.005 * 50 / 90)
    assert 5.0 < (histogram_quantile(counts, 0.99) or 0) <= 10.0


def test_past_the_last_bound_reads_as_the_last_bound() -> None:
    counts = list(EMPTY)
    counts[-1] = 5
    assert histogram_quantile(counts, 0.5) == LATENESS_BOUNDS[-1]


def test_a_queue_with_only_finished_jobs_has_a_row_of_zero_counts() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    done = FinishedBucket("emails", JobStatus.DONE, now - timedelta(seconds=30), 6, (6,))
    overview = Overview(now, [QueueCounts("billing", pending=2, due=1)], [done])
    figures = summarize(overview, [QueueSettings("emails", paused=True)], window=300, bucket=10)
    billing, emails = figures["queues"]
    assert (billing["queue"], billing["pending"], billing["due"], billing["paused"]) == (
        "billing",
        2,
        1,
        False,
    )
    assert emails == {
        "queue": "emails",
        "paused": True,
        "pending": 0,
        "due": 0,
        "running": 0,
        "dead": 0,
        "oldest_due_age": 0.0,
        "done_per_minute": 6.0,
        "dead_per_minute": 0.0,
        "lateness_p50": pytest.approx(LATENESS_BOUNDS[0] / 2),
        "lateness_p99": pytest.approx(LATENESS_BOUNDS[0] * 0.99),
    }
