"""The drain targets of the benchmark's Targets table, on made-up figures: each is computed from
the rows it names, in the layouts it names."""

from __future__ import annotations

from typing import Any

from bench.report import check_targets

X = "\N{MULTIPLICATION SIGN}"  # the reports print ratios with it


def one(value: float) -> dict[str, Any]:
    return {"runs": [value], "median": value, "min": value, "max": value}


def drain(
    system: str, processes: int, batch: int, rate: float, client: float = 50, server: float = 50
) -> dict[str, Any]:
    return {
        "system": system,
        "config": {"processes": processes, "concurrency": 100, "batch": batch},
        "label": f"{processes}p c100 b{batch}",
        "jobs": 10_000,
        "jobs_per_s": one(rate),
        "client_cpu_us_per_job": one(client),
        "server_cpu_us_per_job": one(server),
    }


def checks(rows: list[dict[str, Any]], **figures: Any) -> dict[str, Any]:
    return {c.name: c for c in check_targets({"figures": {"drain": rows, **figures}})}


ROWS = [
    drain("chronoq", 1, 1, 400),
    drain("bare-sql", 1, 1, 500),
    drain("chronoq", 1, 100, 9_000),
    drain("bare-sql", 1, 100, 12_000),
    drain("chronoq", 2, 200, 14_000, client=30, server=33),
    drain("bare-sql", 2, 200, 16_000, client=15, server=30),
    drain("pgqueuer", 2, 200, 10_000),
    drain("pgqueuer", 1, 10, 3_000),
]


def test_drain_against_pgqueuer_and_the_limit_against_pgqueuer() -> None:
    found = checks(ROWS)
    drain_ratio = found["Drain vs PGQueuer (best layouts)"]
    assert (drain_ratio.measured, drain_ratio.met) == (f"1.4{X}", True)
    limit = found["The bare SQL loop vs PGQueuer (best layouts): the design's limit"]
    assert (limit.measured, limit.met) == (f"1.6{X}", True)


def test_against_the_bare_loop_the_worst_layout_counts_among_large_fetches_and_all() -> None:
    found = checks(ROWS)
    large = found["Drain vs the bare SQL loop (worst layout fetching ≥ 100)"]
    assert (large.measured, large.met) == (f"0.75{X}", False)  # 1p b100: 9,000 / 12,000
    every = found["Drain vs the bare SQL loop (worst layout)"]
    assert (every.measured, every.met) == (f"0.75{X}", True)  # 1p b1 is 0.8


def test_cpu_per_job_is_compared_in_pgqueuers_best_layout() -> None:
    found = checks(ROWS)
    worker = found["Worker CPU per job vs the bare SQL loop (PGQueuer's best layout)"]
    server = found["Server CPU per job vs the bare SQL loop (PGQueuer's best layout)"]
    assert (worker.measured, worker.met) == (f"30 against 15 µs (2.00{X})", False)
    assert (server.measured, server.met) == (f"33 against 30 µs (1.10{X})", False)
    without_peer = checks([r for r in ROWS if r["system"] != "pgqueuer"])
    assert without_peer[worker.name].met is None


def test_the_lateness_of_a_herd_is_compared_with_pgqueuers() -> None:
    lateness = [
        {"system": "chronoq", "p99_ms": one(300.0)},
        {"system": "pgqueuer", "p99_ms": one(400.0)},
    ]
    found = checks(ROWS, lateness=lateness)
    versus = found["Due→start lateness p99 (10k due in one second) vs PGQueuer's"]
    assert (versus.measured, versus.met) == (f"0.75 {X}", True)
    assert checks(ROWS)[versus.name].met is None
