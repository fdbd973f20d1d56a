"""The herd figure's arithmetic: the windows and spans that say whether a rate limit held must
count exactly, or figure 6 would pass a limit that was broken (or fail one that held). And a
figure run alone must replace only its own rows when merged into the committed results."""

from __future__ import annotations

from typing import Any

import pytest
from bench.herd import (
    busiest_window,
    ideal_span_s,
    measure_herd,
    per_window,
    window_bound,
)
from bench.merge import MergeError, merge
from bench.systems.base import HerdStart

S = 1_000_000  # microseconds
DUE = 1_700_000_000 * S


def steady(jobs: int, rate: float, burst: int) -> list[HerdStart]:
    """What a perfect bucket does with `jobs` due at DUE: `burst` at once, then one job every
    1 / rate seconds."""
    gap = round(S / rate)
    return [HerdStart(DUE, DUE + max(0, i - burst + 1) * gap) for i in range(jobs)]


def test_a_perfect_bucket_meets_both_limits_exactly() -> None:
    run = measure_herd(steady(2_000, 1_000.0, 50))
    assert run.span_s == pytest.approx(ideal_span_s(2_000, 1_000.0, 50))
    # The burst and the first second's tokens: rate + burst in a closed 1 s window.
    assert run.busiest_sliding_1s == window_bound(1_000.0, 50, 1.0) == 1_050
    assert run.busiest_aligned_1s == 1_049  # [due, due + 1 s) leaves out the job at due + 1 s
    assert run.busiest_sliding_100ms == 150
    assert run.early == 0
    assert sum(run.per_100ms) == 2_000
    assert run.per_100ms[:3] == [149, 100, 100]


def test_a_window_is_closed_and_found_wherever_it_starts() -> None:
    assert busiest_window([0, S], S) == 2  # both ends of the window count
    # The busiest window, [600 ms, 1.6 s], starts neither at 0 nor on a whole second.
    assert busiest_window([0, 600_000, 900_000, S, 1_500_000, 1_550_000, 3 * S], S) == 5
    assert busiest_window([7, 7, 7], S) == 3  # one claim starts its jobs at one clock reading
    assert busiest_window([], S) == 0


def test_aligned_windows_count_from_the_due_instant() -> None:
    assert per_window([DUE, DUE + 99_999, DUE + 100_000, DUE + 350_000], DUE, 100_000) == [
        2,
        1,
        0,
        1,
    ]


def test_lateness_is_start_minus_due_and_early_starts_are_counted() -> None:
    starts = [HerdStart(DUE, DUE + i * 10_000, "ab"[i % 3 == 0]) for i in range(100)]
    starts.append(HerdStart(DUE, DUE - 1, "b"))
    run = measure_herd(starts)
    assert run.per_worker == [66, 35]
    assert run.lateness_p50_s == pytest.approx(0.49)
    assert run.lateness_p99_s == pytest.approx(0.98)
    assert run.lateness_max_s == pytest.approx(0.99)
    assert run.early == 1


def test_no_start_is_an_error_not_a_perfect_score() -> None:
    with pytest.raises(ValueError, match="no herd job"):
        measure_herd([])


def results(figures: dict[str, list[dict[str, Any]]], version: str = "1.6.0") -> dict[str, Any]:
    return {
        "started_at": "2026-01-01T00:00:00Z",
        "duration_s": 10.0,
        "smoke": False,
        "repeats": 3,
        "machine": {"chronoq_commit": "abc"},
        "figures_run": ["herd"],
        "systems": {"pgqueuer": {"version": version}},
        "figures": figures,
    }


def test_merging_a_figure_replaces_its_rows_and_keeps_the_others() -> None:
    base = results({"drain": [{"system": "chronoq"}], "herd": [{"old": True}]})
    base["targets"] = [{"stale": True}]
    part = results({"herd": [{"system": "chronoq", "new": True}]})
    part["started_at"] = "2026-02-02T00:00:00Z"
    merged = merge(base, part)
    assert merged["figures"]["drain"] == [{"system": "chronoq"}]
    assert merged["figures"]["herd"] == [{"system": "chronoq", "new": True}]
    assert merged["separate_runs"]["herd"]["started_at"] == "2026-02-02T00:00:00Z"
    assert "targets" not in merged  # recomputed from the merged figures when written
    assert base["figures"]["herd"] == [{"old": True}]  # the base is not changed in place


def test_a_peer_at_another_version_cannot_be_merged() -> None:
    with pytest.raises(MergeError, match="pgqueuer"):
        merge(results({}), results({"herd": []}, version="1.7.0"))
