"""Turns a run's figures into `results.json`, `RESULTS.md` and PNG charts; checks the targets."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report_tiered
from bench.merge import FIGURE_KEYS, figure_label

ANALYSIS = Path(__file__).with_name("analysis.md")


@dataclass(frozen=True)
class Check:
    name: str
    goal: str
    measured: str
    met: bool | None  # None: a figure it needs was not taken in this run


def _best(figures: dict[str, Any], system: str) -> dict[str, Any] | None:
    rows = [r for r in figures.get("drain", []) if r["system"] == system]
    return max(rows, key=lambda r: r["jobs_per_s"]["median"], default=None)


def _row(figures: dict[str, Any], figure: str, system: str) -> dict[str, Any] | None:
    return next((r for r in figures.get(figure, []) if r["system"] == system), None)


def _ratio_check(name: str, goal: float, ours: float | None, theirs: float | None) -> Check:
    if ours is None or theirs is None or theirs == 0:
        return Check(name, f"≥ {goal}×", "not measured", None)
    ratio = ours / theirs
    return Check(name, f"≥ {goal}×", f"{ratio:.3g}×", ratio >= goal)


# Each chronoq store and the bare loop of its own statements, the limit it is measured against.
BARE_LOOPS = {"chronoq": "bare-sql", "chronoq-sqlite": "bare-sqlite"}


def _worst_layout_check(figures: dict[str, Any], goal: float, min_batch: int = 1) -> Check:
    """chronoq against the bare loop layout for layout (same processes and fetch size), the
    worst of the layouts fetching at least `min_batch` jobs."""
    ours, limit = _by_layout(figures, "chronoq"), _by_layout(figures, "bare-sql")
    ratios = [
        rate / limit[key] for key, rate in ours.items() if limit.get(key) and key[1] >= min_batch
    ]
    name = "Drain vs the bare SQL loop (worst layout"
    name += f" fetching ≥ {min_batch})" if min_batch > 1 else ")"
    if not ratios:
        return Check(name, f"≥ {goal}×", "not measured", None)
    return Check(name, f"≥ {goal}×", f"{min(ratios):.3g}×", min(ratios) >= goal)


def _cpu_checks(figures: dict[str, Any]) -> list[Check]:
    """chronoq's CPU per job against the bare loop's, worker and server apart, in PGQueuer's
    best layout (the layout the drain target compares in)."""
    names = (
        "Worker CPU per job vs the bare SQL loop (PGQueuer's best layout)",
        "Server CPU per job vs the bare SQL loop (PGQueuer's best layout)",
    )
    goals = (1.5, 1.05)
    peer = _best(figures, "pgqueuer")
    rows = [None, None]
    if peer is not None:
        layout = (peer["config"]["processes"], peer["config"]["batch"])
        rows = [_at_layout(figures, system, layout) for system in ("chronoq", "bare-sql")]
    ours, limit = rows
    checks = []
    for name, goal, key in zip(names, goals, ("client", "server"), strict=True):
        if ours is None or limit is None:
            checks.append(Check(name, f"≤ {goal}×", "not measured", None))
            continue
        spent = ours[f"{key}_cpu_us_per_job"]["median"]
        bare = limit[f"{key}_cpu_us_per_job"]["median"]
        ratio = spent / bare
        measured = f"{spent:.0f} against {bare:.0f} µs ({ratio:.2f}×)"
        checks.append(Check(name, f"≤ {goal}×", measured, ratio <= goal))
    return checks


def _at_layout(
    figures: dict[str, Any], system: str, layout: tuple[int, int]
) -> dict[str, Any] | None:
    return next(
        (
            r
            for r in figures.get("drain", [])
            if r["system"] == system and (r["config"]["processes"], r["config"]["batch"]) == layout
        ),
        None,
    )


def _by_layout(figures: dict[str, Any], system: str) -> dict[tuple[int, int], float]:
    """Median drain rates by (processes, batch)."""
    return {
        (r["config"]["processes"], r["config"]["batch"]): r["jobs_per_s"]["median"]
        for r in figures.get("drain", [])
        if r["system"] == system
    }


def _max_check(name: str, goal: float, unit: str, value: float | None) -> Check:
    if value is None:
        return Check(name, f"≤ {goal:g} {unit}".strip(), "not measured", None)
    return Check(name, f"≤ {goal:g} {unit}".strip(), f"{value:.3g} {unit}".strip(), value <= goal)


def check_targets(results: dict[str, Any]) -> list[Check]:
    figures = results["figures"]

    def best_rate(system: str) -> float | None:
        row = _best(figures, system)
        return row["jobs_per_s"]["median"] if row else None

    def median(figure: str, system: str, key: str) -> float | None:
        row = _row(figures, figure, system)
        return row[key]["median"] if row else None

    backlog = {r["future_jobs"]: r["jobs_per_s"]["median"] for r in figures.get("backlog", [])}
    small, large = (min(backlog), max(backlog)) if backlog else (None, None)
    efficiency = _row(figures, "efficiency", "chronoq")
    return [
        _ratio_check(
            "Drain vs PGQueuer (best layouts)", 1.35, best_rate("chronoq"), best_rate("pgqueuer")
        ),
        _ratio_check(
            "The bare SQL loop vs PGQueuer (best layouts): the design's limit",
            1.6,
            best_rate("bare-sql"),
            best_rate("pgqueuer"),
        ),
        _ratio_check(
            "Drain vs Procrastinate (best layouts)",
            10,
            best_rate("chronoq"),
            best_rate("procrastinate"),
        ),
        _ratio_check(
            "Drain vs the bare SQL loop (best layouts)",
            0.85,
            best_rate("chronoq"),
            best_rate("bare-sql"),
        ),
        _worst_layout_check(figures, 0.85, min_batch=100),
        _worst_layout_check(figures, 0.5),
        *_cpu_checks(figures),
        _ratio_check(
            "Bulk enqueue vs raw COPY",
            0.7,
            median("bulk", "chronoq", "jobs_per_s"),
            median("bulk", "bare-sql", "jobs_per_s"),
        ),
        _max_check("Immediate pickup p99", 10, "ms", median("pickup", "chronoq", "p99_ms")),
        _max_check(
            "Due→start lateness p99 (10k due in one second)",
            20,
            "ms",
            median("lateness", "chronoq", "p99_ms"),
        ),
        _max_check(
            "Due→start lateness p99 (10k due in one second) vs PGQueuer's",
            1,
            "×",
            _quotient(
                median("lateness", "chronoq", "p99_ms"), median("lateness", "pgqueuer", "p99_ms")
            ),
        ),
        _ratio_check(
            f"Drain with {large:,} future jobs vs {small:,}"
            if backlog
            else "Drain with a large future backlog vs a small one",
            0.8,
            backlog.get(large) if large else None,
            backlog.get(small) if small else None,
        ),
        _max_check(
            "Round trips per job at saturation",
            0.05,
            "",
            efficiency["round_trips_per_job"] if efficiency else None,
        ),
        *_herd_checks(_row(figures, "herd", "chronoq")),
        _ratio_check(
            "Enqueue one by one vs PGQueuer (calls/s)",
            1,
            median("enqueue", "chronoq", "calls_per_s"),
            median("enqueue", "pgqueuer", "calls_per_s"),
        ),
        _max_check(
            "Enqueue one by one: median latency vs a plain INSERT",
            1.5,
            "×",
            _vs_insert(_row(figures, "enqueue", "chronoq")),
        ),
        _max_check(
            _steady_label(_row(figures, "steady", "chronoq")),
            20,
            "ms",
            median("steady", "chronoq", "p99_ms"),
        ),
    ]


def _quotient(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def _steady_label(row: dict[str, Any] | None) -> str:
    """The steady-stream target names the rate it was measured at: half the drain capacity
    only when the drain ran beside it, else the rate given and why."""
    if row is None or str(row.get("rate_why", "")).startswith("half"):
        return "Due→start lateness p99 (steady stream at half the drain capacity)"
    return f"Due→start lateness p99 (steady stream at {row['rate']:,.0f} jobs/s: {row['rate_why']})"


def _vs_insert(row: dict[str, Any] | None) -> float | None:
    """chronoq's median call against the plain INSERT's, when both were measured."""
    return row["vs_insert"]["median"] if row and "vs_insert" in row else None


def _herd_checks(row: dict[str, Any] | None) -> list[Check]:
    """The rate limit is a guarantee, so its window check takes the worst run; the span is
    how close to the limit the queue ran, a performance figure, so it takes the median."""
    window = "Herd: busiest 1 s window (worst run, sliding)"
    span = "Herd: drain span vs the ideal (N − burst) / rate"
    if row is None or "skipped" in row:
        return [
            Check(window, "≤ rate + burst", "not measured", None),
            Check(span, "within 5%", "not measured", None),
        ]
    worst, bound = row["busiest_sliding_1s"]["max"], row["window_bound_1s"]
    ratio = row["span_ratio"]["median"]
    return [
        Check(window, f"≤ {bound:,.0f}", f"{worst:,.0f} ({worst / bound:.3f}×)", worst <= bound),
        Check(
            span,
            f"{row['ideal_span_s']:.2f} s ± 5%",
            f"{row['span_s']['median']:.2f} s ({ratio:.3f}×)",
            abs(ratio - 1) <= 0.05,
        ),
    ]


# -- markdown -----------------------------------------------------------------------------


def _rate(summary: dict[str, Any]) -> str:
    return f"{summary['median']:,.0f} ({summary['min']:,.0f}–{summary['max']:,.0f})"


def _ms(summary: dict[str, Any]) -> str:
    return f"{summary['median']:,.1f} ({summary['min']:,.1f}–{summary['max']:,.1f})"


def _s(summary: dict[str, Any]) -> str:
    return f"{summary['median']:,.2f} ({summary['min']:,.2f}–{summary['max']:,.2f})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def markdown(results: dict[str, Any], charts: dict[str, str]) -> str:
    figures, systems = results["figures"], results["systems"]

    def title(name: str) -> str:
        return str(systems[name]["title"])

    lines = _header(results)
    lines += ["## Targets", ""]
    lines += _table(
        ["target", "goal", "measured", "met"],
        [
            [c.name, c.goal, c.measured, {True: "yes", False: "**no**", None: "—"}[c.met]]
            for c in check_targets(results)
        ],
    )
    lines += ["## Systems", ""]
    lines += _table(
        ["system", "version", "backend", "settings"],
        [[s["title"], s["version"], s["backend"], s["notes"]] for s in systems.values()],
    )
    sections = (
        ("drain", _drain_section),
        ("bulk", _bulk_section),
        ("pickup", _latency_section),
        ("backlog", _backlog_section),
        ("efficiency", _efficiency_section),
        ("herd", _herd_section),
        ("poison", _poison_section),
    )
    for key, section in sections:
        if figures.get(key):
            lines += section(figures, charts, title)
    if figures.get("tiered"):
        lines += report_tiered.section(figures["tiered"], charts.get("tiered"))
    for key, section in (("enqueue", _enqueue_section), ("steady", _steady_section)):
        if figures.get(key):
            lines += section(figures, charts, title)
    if ANALYSIS.exists():
        lines += [ANALYSIS.read_text(encoding="utf-8").strip(), ""]
    return "\n".join(lines)


def _machine(machine: dict[str, Any]) -> str:
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
        f"Linux {machine['kernel']}, Python {machine['python']}, PostgreSQL "
        f"{machine['postgres']}, Redis {machine['redis']}, SQLite {machine['sqlite']}, "
        f"chronoq commit {machine['chronoq_commit']}"
    )


def _header(results: dict[str, Any]) -> list[str]:
    separate: dict[str, Any] = results.get("separate_runs", {})
    main_figures = [f for f in results.get("figures_run", FIGURE_KEYS) if f not in separate]
    scope = (
        "Every system was measured in this same run, on a fresh database per measurement."
        if len(main_figures) == len(FIGURE_KEYS)
        else "This run measured "
        + ", ".join(figure_label(f) for f in main_figures)
        + ", every system in the same run, on a fresh database per measurement."
    )
    lines = [
        "# Benchmark results",
        "",
        f"Run {results['started_at']}, {results['duration_s']:.0f} s, each figure "
        f"{results['repeats']} time(s): the median, with the lowest and highest run in brackets. "
        + scope,
        "",
        f"Machine: {_machine(results['machine'])}. The database, the workers and the "
        "harness share these cores.",
        "",
    ]
    for figure, run in separate.items():
        smoke = " **a smoke run: its figures are not meaningful**;" if run.get("smoke") else ""
        lines += [
            f"{figure_label(figure).capitalize()} came from a separate run, merged into these "
            f"results:{smoke} run {run['started_at']}, {run['duration_s']:.0f} s, "
            f"{run['repeats']} time(s), on {_machine(run['machine'])}.",
            "",
        ]
    if results.get("smoke"):
        lines += ["**Smoke run**: tiny job counts, figures are not meaningful.", ""]
    return lines


Title = Callable[[str], str]


def _drain_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    lines = [
        "## 1. Drain",
        "",
        "Pending no-op jobs, workers started, jobs/s until none is left. Layout `Np cC bB`: "
        "N worker processes, C jobs in flight per process, B jobs per fetch. Layouts fetching "
        "one job at a time drain a thirtieth of the jobs and layouts fetching ten a fifth (their "
        "rate is steady long before, and the suite has a time budget); the jobs column says how "
        "many. Peers are measured in the best layouts found for them (bench/PEERS.md).",
        "",
    ]
    if "drain" in charts:
        lines += [f"![drain]({charts['drain']})", ""]
    bare = {ours: _by_layout(figures, loop) for ours, loop in BARE_LOOPS.items()}
    rows = []
    for r in figures["drain"]:
        limit = bare.get(r["system"], {}).get((r["config"]["processes"], r["config"]["batch"]))
        versus = f"{r['jobs_per_s']['median'] / limit:.2f}×" if limit else ""
        rate = _rate(r["jobs_per_s"])
        client = f"{r['client_cpu_us_per_job']['median']:.0f}"
        server = f"{r['server_cpu_us_per_job']['median']:.0f}"
        rows.append(
            [title(r["system"]), r["label"], f"{r['jobs']:,}", rate, versus, client, server]
        )
    lines += _table(
        [
            "system",
            "layout",
            "jobs",
            "jobs/s",
            "vs bare loop, same layout",
            "client CPU µs/job",
            "server CPU µs/job",
        ],
        rows,
    )
    return [
        *lines,
        "CPU per job is user plus system time from /proc: the worker processes (client) and the "
        "database server's processes (PostgreSQL backends or redis-server) during the drain, "
        "medians of the runs. On 2 cores their sum bounds the rate: 2 s of CPU per second.",
        "",
    ]


def _bulk_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    lines = ["## 2. Bulk enqueue", ""]
    lines += _table(
        ["system", "jobs", "seconds", "jobs/s"],
        [
            [title(r["system"]), f"{r['jobs']:,}", _ms(r["seconds"]), _rate(r["jobs_per_s"])]
            for r in figures["bulk"]
        ],
    )
    return [*lines, "The bare SQL row is a raw COPY of exactly the rows chronoq writes.", ""]


def _latency_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    lines = [
        "## 3. Latency",
        "",
        "Pickup: one job at a time on an idle system, from the enqueue call to the handler's "
        "first line. Lateness: jobs scheduled evenly across one second, from their due time to "
        "the handler's first line. Milliseconds.",
        "",
    ]
    if "latency" in charts:
        lines += [f"![latency]({charts['latency']})", ""]
    rows = []
    for figure in ("pickup", "lateness"):
        for r in figures.get(figure, []):
            rows.append(
                [figure, title(r["system"]), f"{r['samples']:,}"]
                + [_ms(r[key]) for key in ("p50_ms", "p99_ms", "max_ms")]
            )
    return lines + _table(["figure", "system", "jobs", "p50", "p99", "max"], rows)


def _backlog_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    lines = [
        "## 4. Backlog independence",
        "",
        "Drain of due jobs while many not-yet-due jobs sit in the same table.",
        "",
    ]
    return lines + _table(
        ["system", "layout", "future jobs", "due jobs", "jobs/s"],
        [
            [
                title(r["system"]),
                f"{r['config']['processes']}p b{r['config']['batch']}",
                f"{r['future_jobs']:,}",
                f"{r['due_jobs']:,}",
                _rate(r["jobs_per_s"]),
            ]
            for r in figures["backlog"]
        ],
    )


def _efficiency_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    lines = [
        "## 5. Efficiency at saturation",
        "",
        "Each PostgreSQL system in its best drain layout, through a relay that counts the "
        "messages after which a client waits for the server (`Query` and `Sync`), so every "
        "driver is counted the same way; commits from `pg_stat_database`, less the harness's "
        "own polling.",
        "",
    ]
    return lines + _table(
        ["system", "layout", "jobs", "round trips/job", "commits/job"],
        [
            [
                title(r["system"]),
                f"{r['config']['processes']}p c{r['config']['concurrency']} "
                f"b{r['config']['batch']}",
                f"{r['jobs']:,}",
                f"{r['round_trips_per_job']:.4f}",
                f"{r['commits_per_job']:.4f}",
            ]
            for r in figures["efficiency"]
        ],
    )


def _herd_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    measured = [r for r in figures["herd"] if "skipped" not in r]
    skipped = [r for r in figures["herd"] if "skipped" in r]
    lines = ["## 6. The 09:00 herd under a rate limit", ""]
    if measured:
        first = measured[0]
        lines += [
            f"{first['jobs']:,} no-op jobs, all due at one instant (the first whole second at "
            f"least {first['lead_s']:g} s after their enqueue began, the workers already "
            f"waiting), on a queue limited to {first['rate']:,.0f} jobs/s with the default "
            f"bucket of {first['burst']:g} jobs ({first['burst'] / first['rate'] * 1000:g} ms "
            "worth), declared in the workers' app. Every figure is read from the "
            "database's `started_at` (the instant the claim charged the bucket), not from a "
            "clock in the harness. The limits, from the stored rate and burst: the span from the "
            f"first start to the last cannot be under (N − burst) / rate = "
            f"{first['ideal_span_s']:.2f} s, and no window of 1 s can hold more than rate + "
            f"burst = {first['window_bound_1s']:,.0f} starts (100 ms: "
            f"{first['window_bound_100ms']:,.0f}). Aligned windows are whole seconds from the "
            "due instant; sliding windows are the busiest closed window anywhere. Lateness is "
            "`started_at − run_at`: a limited herd is late by design, the last job by about the "
            "span. Jobs per worker process (from `worker_id`) and the chart are the run with the "
            "median span.",
            "",
        ]
    if "herd" in charts:
        lines += [f"![herd]({charts['herd']})", ""]
    rows = [
        [
            title(r["system"]),
            f"{r['config']['processes']}p c{r['config']['concurrency']} b{r['config']['batch']}",
            f"{r['jobs']:,}",
            f"{_s(r['span_s'])} ({r['span_ratio']['median']:.3f}×)",
            _rate(r["busiest_aligned_1s"]),
            f"{_rate(r['busiest_sliding_1s'])} ({r['busiest_ratio']['max']:.3f}×)",
            _rate(r["busiest_sliding_100ms"]),
            " / ".join(f"{n:,}" for n in r["jobs_per_worker"][r["chart_run"]]),
            " / ".join(
                f"{r[key]['median']:.2f}"
                for key in ("lateness_p50_s", "lateness_p99_s", "lateness_max_s")
            ),
        ]
        for r in measured
    ]
    lines += _table(
        [
            "system",
            "layout",
            "jobs",
            "span s (vs ideal)",
            "busiest aligned 1 s",
            "busiest sliding 1 s (worst vs bound)",
            "busiest sliding 100 ms",
            "jobs per worker process",
            "lateness p50 / p99 / max s",
        ],
        rows,
    )
    early = sum(r["early"] for r in measured)
    if early:
        lines += [f"**{early} job(s) started before they were due.**", ""]
    if skipped:
        lines += ["Not measured (bench/PEERS.md):", ""]
        lines += [f"- {title(r['system'])}: {r['skipped']}." for r in skipped]
        lines += [""]
    return lines


def _poison_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    rows = figures["poison"]
    first = rows[0]
    config = first["config"]
    attempts = first["max_attempts"]
    lines = [
        "## 7. Poison jobs beside ordinary work",
        "",
        f"{first['work_jobs']:,} trivial sync jobs on queue `work`, drained by the real command "
        f"`chronoq worker --processes {config['processes']} --concurrency "
        f"{config['concurrency']} --batch {config['batch']}` (a supervisor and its worker "
        "processes), once alone and once beside poison jobs on queue `poison`: "
        f"{first['exit_hard']} whose handler ends its process (`os._exit(3)`) and "
        f"{first['hang']} whose sync handler blocks past its {first['timeout_s']:g} s timeout "
        "(the worker finishes its other jobs and exits for a fresh process), all with "
        f"max_attempts {attempts} and a backoff of 0.2 s doubling to 1 s. The poison jobs fall "
        "due at even intervals across the time the same work took alone in that repeat, at a "
        "higher priority, so each is claimed as it falls due rather than after the backlog. "
        "Drain time runs from the work queue's first `started_at` to its last `finished_at`; "
        "the ratio is the rate with poison over the rate alone, repeat by repeat. Worker deaths "
        "come from the supervisor's log: crashed (a poison job ended the process) and retired "
        "(a handler stuck past its timeout); down is how long a slot stood empty, from the "
        "death to its new process serving (a crash is restarted after 0.1 s, a retirement at "
        "once), and capacity lost is the share of the worker processes' time inside the work "
        "drain that slots stood empty. A work job running beside a poison job when it struck "
        "loses that attempt and is retried; jobs only claimed ahead are given back unused. The "
        f"harness fails the figure unless every poison job ended dead at exactly {attempts} "
        "attempts, every work job ended done, and the supervisor was still running at the end "
        "and stopped cleanly on SIGTERM. The handler is sync (a thread per job), so the rate "
        "alone is not figure 1's.",
        "",
    ]
    table = []
    for r in rows:
        ratio = r["ratio"]
        share = r["down_share"]
        healthy = r["supervisor_running"] and not any(r["supervisor_exit_codes"])
        table.append(
            [
                title(r["system"]),
                f"{r['config']['processes']}p c{r['config']['concurrency']} "
                f"b{r['config']['batch']}",
                f"{r['work_jobs']:,}",
                f"{r['exit_hard']} exit_hard + {r['hang']} hang",
                _rate(r["baseline_jobs_per_s"]),
                _rate(r["poisoned_jobs_per_s"]),
                f"{ratio['median']:.2f} ({ratio['min']:.2f}–{ratio['max']:.2f})",
                f"{_rate(r['deaths'])}: {r['crashed']['median']:.0f} + "
                f"{r['retired']['median']:.0f}",
                _s(r["down_s_per_death"]),
                f"{share['median']:.0%} ({share['min']:.0%}–{share['max']:.0%})",
                f"{r['poison_dead_at_max_attempts']} of {r['poison_jobs']}",
                f"{_rate(r['work_retried'])} ({r['work_extra_attempts']['median']:,.0f})",
                f"{r['work_not_done']:,}",
                "yes" if healthy else "**no**",
            ]
        )
    lines += _table(
        [
            "system",
            "layout",
            "work jobs",
            "poison jobs",
            "work jobs/s alone",
            "work jobs/s with poison",
            "ratio",
            "worker deaths: crashed + retired",
            "down per death s",
            "capacity lost",
            f"poison jobs dead at {attempts} attempts (all runs)",
            "work jobs retried (attempts lost)",
            "work jobs not done (all runs)",
            "supervisor running at the end",
        ],
        table,
    )
    for r in rows:
        ratio, share = r["ratio"]["median"], r["down_share"]["median"]
        lines += [
            f"With poison jobs beside it, the work queue ran at {ratio:.2f}× its rate alone "
            f"(medians). Its worker slots stood empty {share:.0%} of the processes' time in the "
            f"drain; that alone would leave {1 - share:.2f}×. The two differ by what else a "
            "death costs (the work attempts that ran beside a poison job, the new process's "
            "start-up CPU, a retiring process winding down) and by what it frees: a surviving "
            "process can run faster while its sibling is gone, since the two share the cores "
            "with the database.",
            "",
        ]
        endings = "; ".join(
            f"{task}: " + ", ".join(f"{kind} {n:,}" for kind, n in kinds.items())
            for task, kinds in r["poison_errors"].items()
        )
        lines += [
            f"How the poison attempts ended, all runs together: {endings}. A hang job's attempt "
            "ends as WorkerCrashed when a crash takes its process down before its timeout. "
            "Crashes and retirements are medians of the runs; a claim can take several poison "
            "jobs at once, and one death then fails all of them, so there are fewer deaths than "
            "poison attempts. The crash records name "
            f"{_rate(r['crashed_workers'])} distinct worker processes that died running a job, "
            "against the crashes the supervisor logged.",
            "",
        ]
    return lines


def _us(summary: dict[str, Any]) -> str:
    return f"{summary['median']:,.0f} ({summary['min']:,.0f}–{summary['max']:,.0f})"


def _enqueue_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    rows = figures["enqueue"]
    lines = [
        "## 9. Enqueue one by one",
        "",
        f"{rows[0]['calls']:,} jobs enqueued one call at a time from one client thread, as a "
        "web request enqueues: each system's documented single-job call (chronoq `App.enqueue`, "
        "PGQueuer `Queries.enqueue` of one job through asyncpg, Procrastinate `task.defer_async`, "
        "SAQ `queue.enqueue`; the async ones awaited in one coroutine), after a few calls that "
        "open the connection and prepare the statements. The bare SQL row is the limit: a "
        "prepared single-row INSERT of the row chronoq writes, on one autocommit psycopg "
        "connection. In each repeat every system is open on one fresh database and they take "
        "turns, a tenth of the calls at a time in an order that turns from block to block, so "
        "a busy moment of the shared machine hits them alike; the ratio to the INSERT's median "
        "is taken repeat by repeat. For SQLite that INSERT is a PostgreSQL round trip it does "
        "not make. CPU is the client process's (for SQLite, the database's work too, "
        "which runs in it). The targets this figure serves: chronoq at least PGQueuer's "
        "calls/s, and a median within 1.5× of the plain INSERT's (see Targets).",
        "",
    ]
    table = [
        [
            title(r["system"]),
            f"{r['calls']:,}",
            _us(r["p50_us"]),
            _us(r["p99_us"]),
            _rate(r["calls_per_s"]),
            _us(r["cpu_us_per_call"]),
            _ratio(r.get("vs_insert")),
        ]
        for r in rows
    ]
    return lines + _table(
        [
            "system",
            "calls",
            "median µs",
            "p99 µs",
            "calls/s",
            "client CPU µs/call",
            "median vs plain INSERT",
        ],
        table,
    )


def _ratio(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "—"
    return f"{summary['median']:.2f}× ({summary['min']:.2f}–{summary['max']:.2f})"


def _steady_section(figures: dict[str, Any], charts: dict[str, str], title: Title) -> list[str]:
    rows = figures["steady"]
    lines = [
        "## 10. Lateness of a steady stream",
        "",
        f"No-op jobs falling due evenly for {rows[0]['spread_s']:g} s at half each system's "
        "best drain rate in this run (figure 1), in that best layout, all enqueued ahead with "
        "their due times; without the drain figure beside it, a rate given by `--steady-rate` "
        "(default 2,000 jobs/s) in the system's latency layout. Lateness is the handler's first "
        "line minus the job's due time, in milliseconds; the workers hand their lines to the "
        "harness in batches every 20 ms, as a write per job at these rates would take enough "
        "of the two cores to make the queue late by itself. Started/s counts the starts the "
        "harness received in the middle half of the stream: a system that cannot keep up "
        f"starts fewer than the rate there, and below {rows[0]['reached_share']:.0%} of it the "
        "rate "
        "is marked not reached. The target this figure serves: chronoq's p99 at most 20 ms "
        "(see Targets).",
        "",
    ]
    table = [
        [
            title(r["system"]),
            f"{r['config']['processes']}p c{r['config']['concurrency']} b{r['config']['batch']}",
            f"{r['rate']:,.0f} ({r['rate_why']})",
            f"{r['samples']:,}",
            *(_ms(r[key]) for key in ("p50_ms", "p99_ms", "max_ms")),
            _rate(r["started_per_s"]),
            "yes" if r["reached"] else "**no**",
        ]
        for r in rows
    ]
    lines += _table(
        [
            "system",
            "layout",
            "rate jobs/s",
            "jobs",
            "p50",
            "p99",
            "max",
            "started/s, middle half",
            "rate reached",
        ],
        table,
    )
    missed = [title(r["system"]) for r in rows if not r["reached"]]
    if missed:
        lines += [
            f"Could not keep up with the stream's rate: {', '.join(missed)}. Lateness then "
            "grows through the stream and measures the backlog, not the wake-up.",
            "",
        ]
    return lines


# -- charts -------------------------------------------------------------------------------


def draw_charts(results: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = results["systems"]
    figures = results["figures"]
    written: dict[str, str] = {}

    names = [n for n in systems if _best(figures, n)]
    if names:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
        best = [_best(figures, n) for n in names]
        medians = [b["jobs_per_s"]["median"] if b else 0 for b in best]
        _bars(left, [systems[n]["title"] for n in names], medians, best)
        left.set_title("Drain, best layout of each system")
        left.set_xlabel("jobs/s")
        _grid(right, figures["drain"])
        fig.tight_layout()
        _save(fig, out / "drain.png", plt)
        written["drain"] = "drain.png"

    latency_names = [n for n in systems if _row(figures, "pickup", n)]
    if latency_names:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
        for ax, figure, label in zip(
            axes,
            ("pickup", "lateness"),
            ("Pickup on an idle system", "Due→start lateness"),
            strict=True,
        ):
            _latency(ax, figure, label, latency_names, figures, systems)
        fig.tight_layout()
        _save(fig, out / "latency.png", plt)
        written["latency"] = "latency.png"

    herd_rows = [r for r in figures.get("herd", []) if "per_100ms" in r]
    if herd_rows:
        fig, ax = plt.subplots(figsize=(12, 4.2))
        _herd(ax, herd_rows, systems)
        fig.tight_layout()
        _save(fig, out / "herd.png", plt)
        written["herd"] = "herd.png"

    if figures.get("tiered") and (chart := report_tiered.draw(figures["tiered"], out, plt)):
        written["tiered"] = chart
    return written


def _herd(ax: Any, rows: list[dict[str, Any]], systems: dict[str, Any]) -> None:
    """Starts per 100 ms from the due instant, one line per system (its median-span run),
    against the rate and the bucket's allowance."""
    colors = ("#4c72b0", "#dd8452", "#55a868")
    for row, color in zip(rows, colors, strict=False):
        counts = row["per_100ms"]
        processes = row["config"]["processes"]
        ax.stairs(
            counts,
            [i / 10 for i in range(len(counts) + 1)],
            color=color,
            linewidth=1,
            label=f"{systems[row['system']]['title']}, "
            f"{processes} worker process{'es' if processes > 1 else ''}",
        )
    rate = rows[0]["rate"]
    ax.axhline(
        rate / 10,
        color="#c44e52",
        linestyle="--",
        linewidth=1,
        label=f"the limit: {rate:,.0f}/s = {rate / 10:,.0f} per 100 ms",
    )
    ax.set_xlabel("seconds after the herd fell due")
    ax.set_ylabel("jobs started per 100 ms")
    ax.set_title(
        f"{rows[0]['jobs']:,} jobs due at once, queue limited to {rate:,.0f}/s "
        f"(burst {rows[0]['burst']:g}), from the database's started_at"
    )
    ax.set_ylim(0, max(max(r["per_100ms"]) for r in rows) * 1.25)
    ax.legend(loc="upper right")


def _bars(ax: Any, labels: list[str], medians: list[float], rows: list[Any]) -> None:
    low = [m - (r["jobs_per_s"]["min"] if r else m) for m, r in zip(medians, rows, strict=True)]
    high = [(r["jobs_per_s"]["max"] if r else m) - m for m, r in zip(medians, rows, strict=True)]
    positions = range(len(labels))
    ax.barh(positions, medians, xerr=[low, high], color="#4c72b0", capsize=3)
    ax.set_yticks(list(positions), labels)
    ax.invert_yaxis()
    for y, value, above in zip(positions, medians, high, strict=True):
        ax.text(value + above, y, f"  {value:,.0f}", va="center", fontsize=8)
    ax.set_xlim(0, max(m + h for m, h in zip(medians, high, strict=True)) * 1.18)


def _grid(ax: Any, drain: list[dict[str, Any]]) -> None:
    def layout(row: dict[str, Any]) -> tuple[int, int]:
        return row["config"]["processes"], row["config"]["batch"]

    layouts = sorted({layout(r) for r in drain if r["system"] in ("chronoq", "bare-sql")})
    width = 0.38
    for offset, system, color in (
        (-width / 2, "chronoq", "#4c72b0"),
        (width / 2, "bare-sql", "#999999"),
    ):
        rates = {layout(r): r["jobs_per_s"]["median"] for r in drain if r["system"] == system}
        ax.bar(
            [i + offset for i in range(len(layouts))],
            [rates.get(key, 0) for key in layouts],
            width,
            label=system,
            color=color,
        )
    ax.set_xticks(
        range(len(layouts)),
        [f"{p}p b{b}" for p, b in layouts],
        fontsize=8,
        rotation=30,
        ha="right",
    )
    ax.set_title("chronoq and the bare SQL loop, by processes and batch")
    ax.set_ylabel("jobs/s")
    ax.legend()


def _latency(
    ax: Any,
    figure: str,
    label: str,
    names: list[str],
    figures: dict[str, Any],
    systems: dict[str, Any],
) -> None:
    rows = [_row(figures, figure, n) for n in names]
    positions = range(len(names))
    for offset, key, color in ((-0.2, "p50_ms", "#55a868"), (0.2, "p99_ms", "#c44e52")):
        values = [max(r[key]["median"], 0.01) if r else 0 for r in rows]
        ax.bar([p + offset for p in positions], values, 0.4, label=key[:3], color=color)
    ax.set_yscale("log")
    ax.set_xticks(
        list(positions),
        [systems[n]["title"] for n in names],
        fontsize=8,
        rotation=20,
        ha="right",
    )
    ax.set_ylabel("milliseconds (log)")
    ax.set_title(label)
    ax.legend()


def _save(fig: Any, path: Path, plt: Any) -> None:
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: dict[str, Any], out: Path, log: Callable[[str], None] = print) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results = results | {"targets": [c.__dict__ for c in check_targets(results)]}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    charts = draw_charts(results, out)
    (out / "RESULTS.md").write_text(markdown(results, charts), encoding="utf-8")
    log(f"wrote {out / 'RESULTS.md'}, {out / 'results.json'} and {len(charts)} chart(s)")
