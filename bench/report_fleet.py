"""Figure 11's report, `fleet.md`, and its chart, `fleet.png`: tiered against db dispatch by
fleet size, each comparison a ratio inside one run (tiered ÷ db), and the statements behind
PostgreSQL's work per job in each mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report_tiered import _one, _pairs, _table

GOAL_SLOTS = 256
GOAL_CPU_RATIO = 0.7
GOAL_P99_MS = 20.0
DUE = {
    "spread": "each job due at an instant of its own (evenly at the offered rate)",
    "tick": "the jobs of each enqueue call (50 ms of the stream) due at one instant",
}


def _ratio(tier: float, db: float) -> str:
    return f"{tier / db:.2f}×" if db else "–"


def _pair(db: dict[str, Any], tier: dict[str, Any], value: Any, digits: int = 0) -> str:
    a, b = float(value(db)), float(value(tier))
    return f"{a:,.{digits}f} / {b:,.{digits}f} ({_ratio(b, a)})"


def _p(row: dict[str, Any], key: str) -> float:
    return float(row["lateness"].get(key, float("nan")))


def _fleets(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["fleet"] for r in rows))


def goal(rows: list[dict[str, Any]]) -> list[str]:
    """One line per fleet of at least GOAL_SLOTS slots: is the project's goal met there?"""
    lines = []
    for fleet in _fleets(rows):
        db, tier = (
            _one(rows, fleet=fleet, dispatch="db"),
            _one(rows, fleet=fleet, dispatch="tiered"),
        )
        if not (db and tier) or tier["slots"] < GOAL_SLOTS:
            continue
        ratio = tier["postgres_cpu_us_per_job"] / db["postgres_cpu_us_per_job"]
        p99 = _p(tier, "p99_ms")
        met = ratio <= GOAL_CPU_RATIO and p99 <= GOAL_P99_MS
        lines.append(
            f"- {fleet} ({tier['slots']:,} slots): tiered's PostgreSQL CPU per job is "
            f"{ratio:.2f}× db dispatch's (goal ≤ {GOAL_CPU_RATIO}×), its p99 lateness "
            f"{p99:.1f} ms (goal ≤ {GOAL_P99_MS:.0f} ms): " + ("met" if met else "**not met**")
        )
    return lines


def markdown(result: dict[str, Any], chart: str | None = None) -> str:
    inputs, rows, machine = result["inputs"], result["rows"], result["machine"]
    lo, hi = inputs["sleep_ms"]
    due = inputs.get("due", "spread")
    busy = ", ".join(
        f"{r['fleet']} {r['dispatch']} {r['machine_busy_cores']:.2f} "
        f"({r['machine_busy_cores'] - r['figure_cores']:+.2f} not ours)"
        for r in rows
    )
    lines = [
        "# Figure 11: a fleet, tiered against db dispatch",
        "",
        f"`python -m bench.fleet --sizes {','.join(inputs['sizes'])} --due {due}` on "
        f"{machine['cpu']}, "
        f"{machine['cores']} cores, PostgreSQL {machine['postgres']}, Redis {machine['redis']}, "
        f"chronoq commit {machine['chronoq_commit']}; {result['seconds']:,.0f} s. Each fleet "
        f"and mode once, on private servers: `chronoq worker --processes P --concurrency C` "
        f"(and for tiered one `chronoq scheduler`, {result['tier']['partitions']} partitions, "
        f"stage horizon {result['tier']['stage_horizon_s']:g} s, leader TTL "
        f"{result['tier']['leader_ttl_s']:g} s: the defaults), async jobs sleeping {lo}–{hi} ms, "
        f"offered at {inputs['load']:g} of the slots' capacity (at most "
        f"{inputs['max_rate']:,.0f}/s), {DUE[due]}, each enqueued about {inputs['lead_s']:g} s "
        f"before it falls due; measured over {inputs['window_s']:g} s after "
        f"{inputs['warm_up_s']:g} s of warm-up "
        f"(ANALYZE half-way through it). Statements: {result['statements_source']}, top-level "
        "only.",
        "",
        f"Machine load: load average {' '.join(result['load_before'])} before, "
        f"{' '.join(result['load_after'])} after; cores busy over each window (all processes, "
        f"and what was not this figure's): {busy}. Absolute figures move with that load; the "
        "ratios inside one run hold better.",
        "",
    ]
    if chart:
        lines += [f"![figure 11]({chart})", ""]
    header = [
        "fleet (slots), offered",
        "PostgreSQL CPU µs/job, db / tiered",
        "statements/job",
        "commits/job",
        "lateness p50 ms",
        "lateness p99 ms",
        "other CPU µs/job",
        "lost / twice",
    ]
    table = []
    for fleet in _fleets(rows):
        db, tier = (
            _one(rows, fleet=fleet, dispatch="db"),
            _one(rows, fleet=fleet, dispatch="tiered"),
        )
        if not (db and tier):
            continue
        table.append(
            [
                f"{fleet} ({db['slots']:,}), {db['offered_per_s']:,.0f}/s",
                _pair(db, tier, lambda r: r["postgres_cpu_us_per_job"]),
                _pair(db, tier, lambda r: r["statements_per_job"], 2),
                _pair(db, tier, lambda r: r["commits_per_job"], 2),
                _pair(db, tier, lambda r: _p(r, "p50_ms"), 1),
                _pair(db, tier, lambda r: _p(r, "p99_ms"), 1),
                _pair(db, tier, lambda r: r["other_cpu_us_per_job"]),
                f"{db['lost']}/{db['run_twice']}, {tier['lost']}/{tier['run_twice']}",
            ]
        )
    lines += _table(header, table)
    lines += [
        "Other CPU per job, by process (µs): "
        + "; ".join(
            f"{r['fleet']} {r['dispatch']}: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in r["cpu_us_per_job"].items())
            for r in rows
        )
        + ". `producer` is the figure's own process (the enqueue), outside the other CPU.",
        "",
    ]
    verdict = goal(rows)
    if verdict:
        lines += [
            f"Goal: at ≥ {GOAL_SLOTS} slots, tiered ≤ {GOAL_CPU_RATIO}× db dispatch's "
            f"PostgreSQL CPU per job with p99 lateness ≤ {GOAL_P99_MS:.0f} ms.",
            "",
            *verdict,
            "",
        ]
    lines += ["## Statements per job", ""]
    for row in rows:
        lines += [
            f"### {row['fleet']} ({row['slots']:,} slots), {row['dispatch']}: "
            f"{row['statements_per_job']:.2f} statements and "
            f"{row['statement_exec_us_per_job']:,.0f} µs of execution a job "
            f"(PostgreSQL CPU {row['postgres_cpu_us_per_job']:,.0f} µs a job)",
            "",
        ]
        planned = inputs.get("track_planning", False)
        lines += _table(
            ["statement", "calls/job", "exec µs/job", "µs/call", "rows/call"]
            + (["plans/call", "planning µs/job"] if planned else []),
            [
                [
                    f"`{s['name']}`" + ("" if s["toplevel"] else " (nested)"),
                    f"{s['calls_per_job']:.3f}",
                    f"{s['exec_us_per_job']:,.1f}",
                    f"{s['exec_us_per_call']:,.1f}",
                    f"{s['rows_per_call']:,.1f}",
                ]
                + (
                    [f"{s.get('plans_per_call', 0):.2f}", f"{s.get('plan_us_per_job', 0):,.1f}"]
                    if planned
                    else []
                )
                for s in row["statements"]
            ],
        )
    return "\n".join(lines)


def draw(result: dict[str, Any], out: Path) -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fleets = [f for f in _fleets(rows) if _one(rows, fleet=f, dispatch="tiered")]
    if not fleets:
        return None
    labels = [f"{f}\n{_one(rows, fleet=f)['slots']:,} slots" for f in fleets]  # type: ignore[index]
    panels = [
        ("PostgreSQL CPU, µs/job", lambda r: r["postgres_cpu_us_per_job"]),
        ("Statements/job", lambda r: r["statements_per_job"]),
        ("Due→start lateness p99, ms", lambda r: _p(r, "p99_ms")),
        ("Other processes' CPU, µs/job", lambda r: r["other_cpu_us_per_job"]),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for ax, (title, value) in zip(axes, panels, strict=True):
        db = [float(value(_one(rows, fleet=f, dispatch="db"))) for f in fleets]
        tier = [float(value(_one(rows, fleet=f, dispatch="tiered"))) for f in fleets]
        _pairs(ax, labels, db, tier)
        ax.set_title(title)
    fig.suptitle("A fleet: tiered dispatch (orange) against db dispatch (blue), chronoq, one run")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "fleet.png", dpi=100)
    plt.close(fig)
    return "fleet.png"
