"""The herd figure's arithmetic: from the start instants the database recorded to the numbers
that say whether a rate limit held, and how close to its limit the queue ran.

A token bucket of `rate` tokens a second holding at most `burst` guarantees that any window of
length T holds at most `burst + rate * T` starts, and that N jobs released at once (into a full
bucket) take at least `(N - burst) / rate` seconds from the first start to the last. Everything
here is pure, in whole microseconds, so a test can pin it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench.stats import percentile
from bench.systems.base import HerdStart

SECOND_US = 1_000_000
CHART_BIN_US = 100_000  # the chart's and the short window's width: 100 ms


@dataclass(frozen=True)
class HerdRun:
    """One herd drained, as the database saw it."""

    jobs: int
    span_s: float  # last start - first start
    busiest_aligned_1s: int  # starts in the busiest whole second counted from the due instant
    busiest_sliding_1s: int  # starts in the busiest closed 1 s window, anywhere
    busiest_sliding_100ms: int
    lateness_p50_s: float  # started_at - run_at
    lateness_p99_s: float
    lateness_max_s: float
    early: int  # jobs started before they were due: any is a bug
    per_100ms: list[int]  # starts per 100 ms from the due instant, for the chart
    per_worker: list[int]  # jobs each worker process started, most first: who shared the limit


def measure_herd(starts: Sequence[HerdStart]) -> HerdRun:
    if not starts:
        raise ValueError("no herd job started")
    started = sorted(s.started_us for s in starts)
    due = min(s.due_us for s in starts)
    lateness = sorted((s.started_us - s.due_us) / SECOND_US for s in starts)
    return HerdRun(
        jobs=len(starts),
        span_s=(started[-1] - started[0]) / SECOND_US,
        busiest_aligned_1s=max(per_window(started, due, SECOND_US)),
        busiest_sliding_1s=busiest_window(started, SECOND_US),
        busiest_sliding_100ms=busiest_window(started, CHART_BIN_US),
        lateness_p50_s=percentile(lateness, 0.50),
        lateness_p99_s=percentile(lateness, 0.99),
        lateness_max_s=lateness[-1],
        early=sum(1 for s in starts if s.started_us < s.due_us),
        per_100ms=per_window(started, due, CHART_BIN_US),
        per_worker=sorted(Counter(s.worker for s in starts).values(), reverse=True),
    )


def busiest_window(sorted_us: Sequence[int], width_us: int) -> int:
    """The most starts in any closed window [t, t + width]. A busiest window can always be slid
    right until its left edge is a start, so only windows that begin at a start are tried."""
    best = 0
    right = 0
    for left, edge in enumerate(sorted_us):
        while right < len(sorted_us) and sorted_us[right] <= edge + width_us:
            right += 1
        best = max(best, right - left)
    return best


def per_window(sorted_us: Sequence[int], origin_us: int, width_us: int) -> list[int]:
    """Starts in consecutive windows [origin + k * width, origin + (k + 1) * width). Starts
    before `origin` are left out: `measure_herd` counts them as `early`."""
    if not sorted_us or sorted_us[-1] < origin_us:
        return [0]
    counts = [0] * ((sorted_us[-1] - origin_us) // width_us + 1)
    for instant in sorted_us:
        if instant >= origin_us:
            counts[(instant - origin_us) // width_us] += 1
    return counts


def ideal_span_s(jobs: int, rate: float, burst: float) -> float:
    """The shortest first-to-last start span the bucket allows for `jobs` released at once."""
    return max(0.0, jobs - burst) / rate


def window_bound(rate: float, burst: float, seconds: float) -> float:
    """The most starts the bucket allows in any window of `seconds`."""
    return burst + rate * seconds
