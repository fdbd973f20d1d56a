"""Figure 8's arithmetic and report: the steady stream's rate, the move rate, which mode wins,
and that the figure merges and renders like the others. A slip here would report tiered
dispatch winning where it lost, or a stream rate the machine could not sustain."""

from __future__ import annotations

from typing import Any

import pytest
from bench.merge import figure_label, merge
from bench.report import markdown
from bench.report_tiered import drain_verdicts, section
from bench.tiered import move_rate, steady_rate

from bench import timing_wheel

TIMES = "\N{MULTIPLICATION SIGN}"


def summary(value: float) -> dict[str, Any]:
    return {"runs": [value], "median": value, "min": value, "max": value}


def drain_row(dispatch: str, processes: int, rate: float, leader_us: float) -> dict[str, Any]:
    return {
        "dispatch": dispatch,
        "processes": processes,
        "jobs": 1_000,
        "jobs_per_s": summary(rate),
        "server_cpu_us_per_job": summary(40.0),
        "workers_cpu_us_per_job": summary(50.0),
        "leader_cpu_us_per_job": summary(leader_us),
        "redis_cpu_us_per_job": summary(6.0 if dispatch == "tiered" else 0.0),
    }


def result() -> dict[str, Any]:
    lateness = [
        {"case": case, "dispatch": dispatch, "jobs": 100, "spread_s": 1.0}
        | {key: summary(p99 / 4 if key == "p50_ms" else p99) for key in ("p50_ms", "p99_ms")}
        | {"max_ms": summary(p99 * 2)}
        for case, dispatch, p99 in (
            ("burst", "db", 10.0),
            ("burst", "tiered", 30.0),
            ("steady", "db", 8.0),
            ("steady", "tiered", 4.0),
        )
    ]
    idle = [
        {
            "dispatch": dispatch,
            "workers": workers,
            "window_s": 15.0,
            "statements_per_s": summary(workers * (0.6 if dispatch == "db" else 0.2)),
            "commits_per_s": summary(1.0),
            "fetched_per_s": summary(10.0),
            "server_cpu_pct": summary(0.5),
        }
        for workers in (0, 8)
        for dispatch in ("db", "tiered")
    ]
    return {
        "drain": [drain_row("db", 1, 9_000, 0.0), drain_row("tiered", 1, 7_000, 20.0)],
        "lateness": {
            "steady_rate": 2_000.0,
            "steady_rate_why": "2,000 jobs/s",
            "processes": 2,
            "rows": lateness,
        },
        "idle": idle,
        "move": [
            {
                "batch": 1_000,
                "timers": 5_000,
                "backlog": 0,
                "timers_per_s": summary(100_000.0),
                "unstaged_at_first_move": 0,
            }
        ],
        "failover": {
            "kills": 2,
            "leader_ttl_s": 2.0,
            "fired_s": summary(2.2),
            "fired_p90_s": 2.3,
            "elected_s": summary(2.1),
            "late_s": summary(2.1),
            "fired_runs_s": [2.1, 2.3],
        },
    }


def test_the_steady_stream_is_2000_a_second_unless_half_the_slower_drain_is_less() -> None:
    fast = [drain_row("db", 2, 16_000, 0), drain_row("tiered", 2, 9_000, 20)]
    assert steady_rate(fast, 2_000.0)[0] == 2_000.0
    slow = [*fast, drain_row("tiered", 1, 3_000, 20), drain_row("db", 1, 2_000, 0)]
    assert steady_rate(slow, 2_000.0)[0] == 2_000.0  # each mode's best layout counts
    rate, why = steady_rate([drain_row("db", 1, 3_000, 0), drain_row("tiered", 1, 2_500, 0)], 2e3)
    assert rate == 1_250
    assert "half" in why
    assert steady_rate([], 2_000.0)[0] == 2_000.0


def test_the_move_rate_leaves_out_the_first_call_whose_start_is_unknown() -> None:
    moves = [(10.0, 1_000, 5_000), (10.01, 1_000, 5_000), (10.02, 1_000, 5_000)]
    assert move_rate(moves) == pytest.approx(2_000 / 0.02)


def test_a_mode_that_drains_slower_is_said_to_lose_with_its_cpu_per_job() -> None:
    lines = drain_verdicts(result()["drain"])
    assert lines == [
        f"- 1 process(es): tiered drains at 0.78{TIMES} db dispatch (**tiered loses**): per job, "
        "its partition leader spent 20 µs of CPU, Redis 6 µs, PostgreSQL 40 µs against db "
        "dispatch's 40 µs, the workers 50 µs against 50 µs: 116 µs of CPU a job in all against "
        "90 µs, on cores that every process shares."
    ]
    winning = [drain_row("db", 4, 5_000, 0.0), drain_row("tiered", 4, 6_000, 20.0)]
    assert drain_verdicts(winning) == [
        f"- 4 process(es): tiered drains at 1.20{TIMES} db dispatch."
    ]


def test_the_section_says_which_mode_wins_each_lateness_case() -> None:
    text = "\n".join(section(result(), "tiered.png"))
    assert f"- burst: tiered's p99 is 3.0{TIMES} db dispatch's (**tiered loses**)." in text
    assert f"- steady: tiered's p99 is 0.5{TIMES} db dispatch's (tiered wins)." in text
    assert "![tiered](tiered.png)" in text
    assert "2 kills: median 2.20 s" in text


def test_a_skipped_figure_says_why() -> None:
    lines = section({"skipped": "etcd is not installed"}, None)
    assert "Not measured: etcd is not installed." in lines


def test_the_timing_wheel_against_heapq_is_part_of_the_figure_even_without_servers() -> None:
    wheel = timing_wheel.run(
        timing_wheel.Settings(
            (timing_wheel.Case(200, 60.0, "over 60 s"),), 1, True, log=lambda _: None
        )
    )
    for figure in (result() | {"wheel": wheel}, {"skipped": "etcd is missing", "wheel": wheel}):
        text = "\n".join(section(figure, None))
        assert "**The timing wheel against heapq.**" in text
        assert "| 200 over 60 s | wheel |" in text
        assert "| 200 over 60 s | heapq |" in text
        assert "heapq ÷ wheel" in text


def test_figure_8_merges_and_renders_like_the_others() -> None:
    base: dict[str, Any] = {
        "started_at": "2026-01-01T00:00:00Z",
        "duration_s": 1.0,
        "repeats": 1,
        "figures_run": ["herd"],
        "systems": {
            "chronoq": {"title": "chronoq", "version": "1", "backend": "postgres", "notes": ""}
        },
        "figures": {"herd": []},
        "machine": {},
    }
    part = base | {"figures_run": ["tiered"], "figures": {"tiered": result()}}
    merged = merge(base, part)
    assert merged["figures"]["tiered"] == result()
    assert figure_label("tiered") == "figure 8 (tiered dispatch against db dispatch)"
    keys = ("cpu", "cores", "memory_gib", "kernel", "python", "postgres", "redis", "sqlite")
    machine = dict.fromkeys((*keys, "chronoq_commit"), "x")
    merged["machine"] = machine
    merged["separate_runs"]["tiered"]["machine"] = machine
    assert "## 8. Tiered dispatch against db dispatch" in markdown(merged, {})


def test_figure_8_merged_over_a_run_that_skipped_it_says_so() -> None:
    """A full run without etcd measures figure 8's timing wheel only; figure 8 run on its own
    and merged over it is marked, so the suite's duration counts that run's time too."""
    base: dict[str, Any] = {
        "figures_run": ["tiered"],
        "systems": {},
        "figures": {"tiered": {"skipped": "etcd is not installed", "wheel": {}}},
    }
    part = base | {"started_at": "later", "duration_s": 2.0, "figures": {"tiered": result()}}
    merged = merge(base, part)
    assert merged["separate_runs"]["tiered"]["replaced_skipped"] == "etcd is not installed"
    again = merge(merged, part)
    assert "replaced_skipped" not in again["separate_runs"]["tiered"]
