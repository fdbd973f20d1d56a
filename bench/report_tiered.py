"""Figure 8 in RESULTS.md and `tiered.png`: tiered dispatch against db dispatch.

Every comparison is a ratio inside one run (tiered ÷ db), and each says which mode won; where
tiered loses, the section names what the run measured that explains it (CPU per job by process,
statements per second with no worker at all).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import timing_wheel

DB_COLOR, TIER_COLOR = "#4c72b0", "#dd8452"


def _rows(rows: Sequence[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _one(rows: Sequence[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    found = _rows(rows, **match)
    return found[0] if found else None


def _med(row: dict[str, Any] | None, key: str) -> float:
    return float(row[key]["median"]) if row else float("nan")


def _range(summary: dict[str, Any], digits: int = 0) -> str:
    f = f"{{:,.{digits}f}}"
    return f"{f.format(summary['median'])} ({f.format(summary['min'])}–{f.format(summary['max'])})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


CPU_KEYS = (
    "server_cpu_us_per_job",
    "workers_cpu_us_per_job",
    "leader_cpu_us_per_job",
    "redis_cpu_us_per_job",
)


def total_cpu(row: dict[str, Any] | None) -> float:
    """CPU per job of every process a drain used, microseconds."""
    return sum(_med(row, key) for key in CPU_KEYS)


def drain_verdicts(drain: Sequence[dict[str, Any]]) -> list[str]:
    """One line per process count: tiered ÷ db, and where tiered loses, where its CPU went."""
    lines = []
    for processes in sorted({r["processes"] for r in drain}):
        db = _one(drain, dispatch="db", processes=processes)
        tier = _one(drain, dispatch="tiered", processes=processes)
        if not (db and tier):
            continue
        ratio = _med(tier, "jobs_per_s") / _med(db, "jobs_per_s")
        line = f"- {processes} process(es): tiered drains at {ratio:.2f}× db dispatch"
        if ratio < 1:
            line += (
                f" (**tiered loses**): per job, its partition leader spent "
                f"{_med(tier, 'leader_cpu_us_per_job'):.0f} µs of CPU, Redis "
                f"{_med(tier, 'redis_cpu_us_per_job'):.0f} µs, PostgreSQL "
                f"{_med(tier, 'server_cpu_us_per_job'):.0f} µs against db dispatch's "
                f"{_med(db, 'server_cpu_us_per_job'):.0f} µs, the workers "
                f"{_med(tier, 'workers_cpu_us_per_job'):.0f} µs against "
                f"{_med(db, 'workers_cpu_us_per_job'):.0f} µs: {total_cpu(tier):.0f} µs of CPU a "
                f"job in all against {total_cpu(db):.0f} µs, on cores that every process shares"
            )
        lines.append(line + ".")
    return lines


def section(result: dict[str, Any], chart: str | None) -> list[str]:
    lines = ["## 8. Tiered dispatch against db dispatch", ""]
    if "skipped" in result:
        return [*lines, f"Not measured: {result['skipped']}.", "", *_wheel(result.get("wheel"))]
    lines += [
        "Both modes are chronoq, measured in the same run on private servers started for this "
        "figure (a PostgreSQL cluster with pg_stat_statements, a redis-server, one etcd "
        "member), so the statements and the PostgreSQL CPU counted are this figure's alone. "
        "Tiered dispatch runs its one partition leader as a process of its own (static "
        "elector, 4 partitions, horizon 10 s) beside the workers; the workers are chronoq "
        "`Worker`s of an async no-op task. Ratios are tiered ÷ db within this run.",
        "",
    ]
    if chart:
        lines += [f"![tiered]({chart})", ""]
    lines += _drain(result["drain"])
    lines += _lateness(result["lateness"])
    lines += _idle(result["idle"])
    lines += _move(result["move"])
    lines += _failover(result["failover"])
    lines += _wheel(result.get("wheel"))
    return lines


def _wheel(wheel: dict[str, Any] | None) -> list[str]:
    """The partition leader's timing wheel against CPython's heapq, where each wins."""
    if not wheel:
        return []
    inputs = wheel["inputs"]
    return [
        f"**The timing wheel against heapq.** Run {wheel['started_at']}, each case "
        f"{wheel['repeats']} time(s), {inputs['cancelled']:.0%} of the timers cancelled at "
        "random before the drain; µs of CPU per operation (expire: per timer fired), the median "
        "with the lowest and highest run. heapq cancels by lazy deletion (a stale entry is "
        "dropped when it reaches the top). Where heapq wins, it wins: insert and cancel cost "
        "CPython's C heap less than the wheel's Python. What the wheel buys is expiry by whole "
        "bucket, which grows cheaper than popping a heap as timers grow, and a cancelled "
        "timer's memory at once (the heap keeps it until its deadline). The standalone run, "
        "with memory per timer: `python -m bench.timing_wheel` (bench/timing_wheel.md).",
        "",
        *timing_wheel.table_lines(wheel),
    ]


def _drain(drain: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"**Drain.** {drain[0]['jobs']:,} pending no-op jobs, N worker processes (100 in "
        "flight, 100 per fetch or stream read), jobs/s from `go` until none is due or running; "
        "CPU per job by process.",
        "",
    ]
    rows = [
        [
            r["dispatch"],
            str(r["processes"]),
            _range(r["jobs_per_s"]),
            *(f"{r[key]['median']:.0f}" for key in CPU_KEYS),
        ]
        for r in drain
    ]
    header = ["dispatch", "processes", "jobs/s", "PostgreSQL µs/job", "workers µs/job"]
    lines += _table([*header, "leader µs/job", "Redis µs/job"], rows)
    return [*lines, *drain_verdicts(drain), ""]


def _lateness(lateness: dict[str, Any]) -> list[str]:
    rows = lateness["rows"]
    burst = _one(rows, case="burst", dispatch="db")
    steady = _one(rows, case="steady", dispatch="db")
    assert burst is not None
    assert steady is not None
    lines = [
        f"**Due→start lateness** (`started_at − run_at`, both on the database clock), "
        f"{lateness['processes']} worker processes: {burst['jobs']:,} jobs due evenly within "
        f"one second, then a steady stream of {lateness['steady_rate']:,.0f} jobs/s for "
        f"{steady['spread_s']:g} s ({steady['jobs']:,} jobs); the rate is "
        f"{lateness['steady_rate_why']}. For tiered dispatch the last column is how late "
        "the leader's move.lua calls ran (from the earliest timer of each call falling due to "
        "the call, on the database clock): the part of the lateness spent before a job reached "
        "its stream; the rest is the stream hop, the claim by id and the start.",
        "",
    ]
    table = [
        [
            r["case"],
            r["dispatch"],
            f"{r['jobs']:,}",
            *(_range(r[key], 1) for key in ("p50_ms", "p99_ms", "max_ms")),
            " / ".join(f"{r['move'][k]['median']:.1f}" for k in ("p50_ms", "p99_ms", "max_ms"))
            if "move" in r
            else "",
        ]
        for r in rows
    ]
    header = ["case", "dispatch", "jobs", "p50 ms", "p99 ms", "max ms"]
    lines += _table([*header, "leader's move calls late p50 / p99 / max ms"], table)
    for case in ("burst", "steady"):
        db, tier = _one(rows, case=case, dispatch="db"), _one(rows, case=case, dispatch="tiered")
        ratio = _med(tier, "p99_ms") / _med(db, "p99_ms")
        verdict = "**tiered loses**" if ratio > 1 else "tiered wins"
        lines.append(f"- {case}: tiered's p99 is {ratio:.1f}× db dispatch's ({verdict}).")
    return [*lines, ""]


def _idle(idle: list[dict[str, Any]]) -> list[str]:
    window = idle[0]["window_s"]
    lines = [
        f"**Poll pressure.** N idle worker processes (forked from one parent after import, "
        f"one pooled connection each), then one window of {window:g} s: statements per second "
        "in the figure's database as pg_stat_statements counts them (this database only, "
        "utility statements such as LISTEN included), transactions committed and rows "
        "fetched from pg_stat_database, and the CPU of every PostgreSQL process of the "
        "private server (percent of one core). Tiered includes its partition leader, which "
        "stages from PostgreSQL once a second whatever the number of workers; the 0-worker "
        "row is that leader alone (db dispatch: nothing).",
        "",
    ]
    rows = [
        [
            r["dispatch"],
            str(r["workers"]),
            f"{r['statements_per_s']['median']:.1f}",
            f"{r['commits_per_s']['median']:.1f}",
            f"{r['fetched_per_s']['median']:.1f}",
            f"{r['server_cpu_pct']['median']:.2f}",
        ]
        for r in idle
    ]
    header = ["dispatch", "idle workers", "statements/s", "commits/s", "rows fetched/s"]
    lines += _table([*header, "PostgreSQL CPU %"], rows)
    return lines


def _move(move: list[dict[str, Any]]) -> list[str]:
    lines = [
        "**Timers moved by one partition leader** (one partition, the static elector, in the "
        "harness process): jobs all due at one instant, staged into Redis and the timing "
        "wheel beforehand; timers/s from the end of the first move.lua call to the end of the "
        "last (the first call's timers left out). The last row has that many jobs pending "
        "a day ahead, beyond the 30 s horizon.",
        "",
    ]
    rows = [
        [
            f"{r['batch']:,}",
            f"{r['timers']:,}",
            f"{r['backlog']:,}",
            _range(r["timers_per_s"]),
            f"{r['unstaged_at_first_move']:,}",
        ]
        for r in move
    ]
    header = ["Lua batch", "timers", "pending beyond horizon", "timers/s"]
    return [*lines, *_table([*header, "not yet staged at the first move"], rows)]


def _failover(failover: dict[str, Any]) -> list[str]:
    ttl = failover["leader_ttl_s"]
    fired = failover["fired_s"]
    return [
        f"**Failover.** Two leader processes elected in etcd (lease TTL {ttl:g} s), one "
        "partition, one tiered worker. Each time: a probe job due 0.1 s after the kill, "
        "SIGKILL the process that leads the partition at that instant (as its own "
        f"announcements say), seconds from the kill to the probe's start; then a new standby. "
        f"{failover['kills']} kills: median {fired['median']:.2f} s, p90 "
        f"{failover['fired_p90_s']:.2f} s, range {fired['min']:.2f}–{fired['max']:.2f} s "
        f"({fired['median'] / ttl:.2f}× the TTL); the standby said it leads after "
        f"{failover['elected_s']['median']:.2f} s (median); the probe started "
        f"{failover['late_s']['median']:.2f} s after it was due (median).",
        "",
        "Every kill, seconds to the probe's start: "
        + ", ".join(f"{s:.2f}" for s in failover["fired_runs_s"])
        + f". Leader step-downs not caused by a kill: {failover.get('step_downs', 0)}"
        + _reasons(failover.get("step_down_reasons"))
        + ".",
        "",
    ]


def _reasons(reasons: dict[str, int] | None) -> str:
    if not reasons:
        return ""
    return " (" + ", ".join(f"{why}: {n}" for why, n in sorted(reasons.items())) + ")"


# -- chart --------------------------------------------------------------------------------


def draw(result: dict[str, Any], out: Path, plt: Any) -> str | None:
    if "drain" not in result:
        return None
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    _drain_chart(axes[0][0], result["drain"])
    _lateness_chart(axes[0][1], result["lateness"]["rows"])
    _failover_chart(axes[0][2], result["failover"])
    _idle_chart(axes[1][0], result["idle"], "statements_per_s", "statements/s")
    _idle_chart(axes[1][1], result["idle"], "server_cpu_pct", "PostgreSQL CPU, % of a core")
    _move_chart(axes[1][2], result["move"])
    fig.suptitle("Tiered dispatch (orange) against db dispatch (blue), chronoq, one run")
    fig.tight_layout()
    fig.savefig(out / "tiered.png", dpi=100)
    plt.close(fig)
    return "tiered.png"


def _pairs(ax: Any, labels: list[str], db: list[float], tier: list[float]) -> None:
    positions = range(len(labels))
    ax.bar([p - 0.2 for p in positions], db, 0.4, color=DB_COLOR, label="db")
    ax.bar([p + 0.2 for p in positions], tier, 0.4, color=TIER_COLOR, label="tiered")
    ax.set_xticks(list(positions), labels)
    ax.legend()


def _drain_chart(ax: Any, drain: list[dict[str, Any]]) -> None:
    counts = sorted({r["processes"] for r in drain})
    db = [_med(_one(drain, dispatch="db", processes=n), "jobs_per_s") for n in counts]
    tier = [_med(_one(drain, dispatch="tiered", processes=n), "jobs_per_s") for n in counts]
    _pairs(ax, [f"{n} process(es)" for n in counts], db, tier)
    ax.set_title("Drain, jobs/s")


def _lateness_chart(ax: Any, rows: list[dict[str, Any]]) -> None:
    labels, db, tier = [], [], []
    for case in ("burst", "steady"):
        for key in ("p50_ms", "p99_ms", "max_ms"):
            labels.append(f"{case}\n{key[:-3]}")
            db.append(max(_med(_one(rows, case=case, dispatch="db"), key), 0.01))
            tier.append(max(_med(_one(rows, case=case, dispatch="tiered"), key), 0.01))
    _pairs(ax, labels, db, tier)
    ax.set_yscale("log")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title("Due→start lateness, ms (log)")


def _idle_chart(ax: Any, idle: list[dict[str, Any]], key: str, label: str) -> None:
    for dispatch, color in (("db", DB_COLOR), ("tiered", TIER_COLOR)):
        rows = _rows(idle, dispatch=dispatch)
        ax.plot(
            [r["workers"] for r in rows],
            [r[key]["median"] for r in rows],
            marker="o",
            color=color,
            label=dispatch,
        )
    ax.set_xlabel("idle worker processes")
    ax.set_title(f"Idle workers: {label}")
    ax.legend()


def _move_chart(ax: Any, move: list[dict[str, Any]]) -> None:
    labels = [
        f"batch {r['batch']:,}" + (f"\n+{r['backlog']:,} later" if r["backlog"] else "")
        for r in move
    ]
    ax.bar(range(len(move)), [r["timers_per_s"]["median"] for r in move], color=TIER_COLOR)
    ax.set_xticks(range(len(move)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_title("Timers moved by one leader, /s (log)")


def _failover_chart(ax: Any, failover: dict[str, Any]) -> None:
    runs = failover["fired_runs_s"]
    ax.hist(runs, bins=min(10, max(1, len(runs))), color=TIER_COLOR)
    ax.axvline(failover["leader_ttl_s"], color="#c44e52", linestyle="--", label="lease TTL")
    ax.set_xlabel("seconds from leader SIGKILL to the next timer's start")
    ax.set_title(f"Failover, {failover['kills']} kills")
    ax.legend()
