"""Figures 9 and 10: enqueue one by one, and the lateness of a steady stream.

The plain INSERT must write exactly the row `App.enqueue` writes, or figure 9's limit would be
the cost of a different row; the stream's rate must be half the system's own drain capacity;
the calls must be split and interleaved as the report says; and both figures must merge and
render like the others, with their targets checked."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from bench.__main__ import parse
from bench.harness import (
    STREAM_REACHED,
    Singly,
    StreamRate,
    StreamRun,
    _singly_row,
    _stream_row,
    block_sizes,
    middle_rate,
    rotated,
    stream_rate,
)
from bench.merge import figure_label, merge
from bench.report import _steady_label, check_targets, markdown
from bench.systems.bare_sql import BareSQL
from bench.systems.base import Recorder, Target, WorkerConfig
from bench.systems.chronoq_pg import ChronoqPostgres
from bench.systems.chronoq_sqlite import ChronoqSqlite
from psycopg.rows import dict_row


def drain_row(system: str, rate: float) -> dict[str, Any]:
    return {"system": system, "jobs_per_s": {"median": rate}}


def test_the_stream_runs_at_half_the_systems_own_best_drain_rate() -> None:
    rows = [drain_row("chronoq", 9_000), drain_row("chronoq", 25_000), drain_row("saq", 2_800)]
    assert stream_rate(rows, "chronoq", 2_000, None) == StreamRate(
        12_500, "half the best drain rate, 25,000"
    )
    assert stream_rate(rows, "saq", 2_000, None).rate == 1_400


def test_without_a_drain_the_given_rate_is_used_and_a_cap_holds_either_way() -> None:
    rows = [drain_row("chronoq", 25_000)]
    assert stream_rate(rows, "pgqueuer", 2_000, None) == StreamRate(
        2_000, "drain not measured in this run"
    )
    capped = stream_rate(rows, "chronoq", 2_000, 150)
    assert capped.rate == 150
    assert "half the best drain rate" in capped.why
    assert stream_rate([], "chronoq", 100, 150).rate == 100


def test_the_started_rate_counts_the_middle_half_of_the_stream_only() -> None:
    # 100 starts a second over 10 s from t=1000, and a tail of 500 late starts after it.
    arrivals = [1_000 + i / 100 for i in range(1_000)] + [1_010.5] * 500
    assert middle_rate(arrivals, 1_000, 10) == pytest.approx(100)
    # A system that starts half the rate is seen starting half the rate.
    slow = [1_000 + i / 50 for i in range(1_000)]
    assert middle_rate(slow, 1_000, 10) == pytest.approx(50)


def test_a_stream_below_the_share_of_its_rate_is_marked_not_reached() -> None:
    config = WorkerConfig(2, 100, 100)
    rate = StreamRate(1_000, "drain not measured in this run")
    kept = _stream_row("chronoq", config, rate, 10, [StreamRun([0.001, 0.002], 990)])
    missed = _stream_row("saq", config, rate, 10, [StreamRun([0.5, 2.0], 600)])
    assert kept["reached"] and not missed["reached"]
    assert kept["reached_share"] == STREAM_REACHED
    assert kept["p99_ms"]["median"] == 2.0
    assert (kept["rate"], kept["samples"], kept["config"]) == (1_000, 2, config.to_dict())


def test_calls_are_split_into_even_blocks_and_the_order_turns() -> None:
    assert block_sizes(2_000, 10) == [200] * 10
    assert block_sizes(53, 10) == [6, 6, 6, 5, 5, 5, 5, 5, 5, 5]
    assert block_sizes(3, 10) == [1, 1, 1]
    assert sum(block_sizes(2_001, 10)) == 2_001
    assert rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert rotated(["a", "b", "c"], 4) == ["b", "c", "a"]


def test_the_ratio_to_the_plain_insert_is_taken_repeat_by_repeat() -> None:
    ours = [Singly([0.002] * 4, 0.008, 0.0008), Singly([0.009] * 4, 0.036, 0.0008)]
    bare = [Singly([0.001] * 4, 0.004, 0.0004), Singly([0.003] * 4, 0.012, 0.0004)]
    row = _singly_row("chronoq", 4, ours, bare)
    assert row["vs_insert"]["runs"] == [2.0, 3.0]
    assert row["p50_us"]["median"] == pytest.approx(5_500)
    assert row["calls_per_s"]["runs"] == [500, pytest.approx(111.111111)]
    assert row["cpu_us_per_call"]["median"] == pytest.approx(200)
    assert "vs_insert" not in _singly_row("saq", 4, ours, None)


def test_the_plain_insert_writes_the_row_chronoq_writes(pg_dsn: str, tmp_path: Path) -> None:
    target = Target(pg_dsn, "redis://unused", str(tmp_path / "bench.db"))
    chronoq, bare = ChronoqPostgres(target), BareSQL(target)
    try:
        assert len(chronoq.enqueue_singly(3)) == 3
        seconds = bare.enqueue_singly(3)
    finally:
        chronoq.close()
        bare.close()
    assert len(seconds) == 3 and all(s > 0 for s in seconds)
    with psycopg.connect(pg_dsn, row_factory=dict_row) as conn:
        rows = conn.execute("SELECT * FROM chronoq_jobs ORDER BY id").fetchall()
    assert len(rows) == 6

    def written(row: dict[str, Any]) -> dict[str, Any]:
        # The id and the instants differ from call to call whoever writes the row.
        return {k: v for k, v in row.items() if k != "id" and not isinstance(v, datetime)}

    assert written(rows[0]) == written(rows[-1])
    assert all(row["run_at"] <= row["created_at"] for row in rows)  # due at once


def test_chronoq_enqueues_one_by_one_on_sqlite_too(tmp_path: Path) -> None:
    system = ChronoqSqlite(Target("postgresql://unused", "redis://unused", str(tmp_path / "b.db")))
    try:
        assert len(system.enqueue_singly(4)) == 4
        assert system.unfinished(cap=10) == 4
    finally:
        system.close()


def test_a_batched_recorder_writes_its_lines_together_and_loses_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = Recorder(record=True, flush_every=3_600)  # its own flush comes far too late
    for _ in range(3):
        recorder.started(1.0)
    recorder.started(None)  # a job without a due time (a drain's) records nothing
    assert capsys.readouterr().out == ""
    recorder.flush()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(float(line) > 1e9 for line in lines)
    recorder.flush()
    assert capsys.readouterr().out == ""


def test_a_steady_rate_must_be_a_positive_number() -> None:
    assert parse(["--steady-rate", "500"]).steady_rate == 500
    for bad in ("0", "-3", "fast", "inf"):
        with pytest.raises(SystemExit):
            parse(["--steady-rate", bad])


def test_figures_9_and_10_merge_render_and_check_their_targets() -> None:
    keys = ("cpu", "cores", "memory_gib", "kernel", "python", "postgres", "redis", "sqlite")
    machine = dict.fromkeys((*keys, "chronoq_commit"), "x")
    systems = {
        name: {"title": name, "version": "1", "backend": "postgres", "notes": ""}
        for name in ("chronoq", "bare-sql", "pgqueuer")
    }
    base: dict[str, Any] = {
        "started_at": "2026-01-01T00:00:00Z",
        "duration_s": 1.0,
        "repeats": 1,
        "figures_run": ["herd"],
        "systems": systems,
        "figures": {"herd": []},
        "machine": machine,
    }
    part = base | {
        "figures_run": ["enqueue", "steady"],
        "figures": {"enqueue": enqueue_rows(), "steady": steady_rows()},
    }
    merged = merge(base, part)
    assert figure_label("enqueue") == "figure 9 (enqueue one by one)"
    assert figure_label("steady") == "figure 10 (lateness of a steady stream)"
    text = markdown(merged, {})
    assert "## 9. Enqueue one by one" in text
    assert "## 10. Lateness of a steady stream" in text
    assert "| chronoq | 2p c100 b100 | 1,000 (drain not measured in this run) |" in text
    assert "Could not keep up with the stream's rate: pgqueuer" in text
    checks = {c.name: c for c in check_targets(merged)}
    assert checks["Enqueue one by one vs PGQueuer (calls/s)"].met is True
    assert checks["Enqueue one by one: median latency vs a plain INSERT"].met is False
    # The target names the rate it was measured at: without the drain beside it, not "half".
    label = "Due→start lateness p99 (steady stream at 1,000 jobs/s: drain not measured in this run)"
    assert checks[label].met is True
    assert _steady_label(None) == (
        "Due→start lateness p99 (steady stream at half the drain capacity)"
    )
    halved = steady_rows()[0] | {"rate_why": "half the best drain rate, 2,000"}
    assert _steady_label(halved) == _steady_label(None)


def enqueue_rows() -> list[dict[str, Any]]:
    def row(system: str, p50: float, rate: float, ratio: float) -> dict[str, Any]:
        def one(value: float) -> dict[str, Any]:
            return {"runs": [value], "median": value, "min": value, "max": value}

        return {
            "system": system,
            "calls": 2_000,
            "p50_us": one(p50),
            "p99_us": one(p50 * 3),
            "max_us": one(p50 * 9),
            "calls_per_s": one(rate),
            "cpu_us_per_call": one(100),
            "vs_insert": one(ratio),
        }

    return [
        row("chronoq", 800, 1_200, 1.6),
        row("bare-sql", 500, 1_900, 1),
        row("pgqueuer", 900, 1_000, 1.8),
    ]


def steady_rows() -> list[dict[str, Any]]:
    def row(system: str, p99: float, started: float) -> dict[str, Any]:
        def one(value: float) -> dict[str, Any]:
            return {"runs": [value], "median": value, "min": value, "max": value}

        return {
            "system": system,
            "samples": 10_000,
            "p50_ms": one(p99 / 4),
            "p99_ms": one(p99),
            "max_ms": one(p99 * 2),
            "config": WorkerConfig(2, 100, 100).to_dict(),
            "rate": 1_000,
            "rate_why": "drain not measured in this run",
            "spread_s": 10.0,
            "started_per_s": one(started),
            "reached": started >= STREAM_REACHED * 1_000,
            "reached_share": STREAM_REACHED,
        }

    return [row("chronoq", 12.0, 1_000), row("pgqueuer", 900.0, 700)]
