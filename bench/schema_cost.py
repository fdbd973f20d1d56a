"""`python -m bench.schema_cost`: what each index and trigger of `chronoq_jobs` costs the server.

Every index a claim or a finish must update, and every trigger its UPDATE fires, is PostgreSQL
work paid once per job. This measures that work variant by variant: the table as chronoq ships
it, then the same table without one index or trigger at a time, then a minimal table (the
primary key and the claim index, no triggers) as the floor of the design.

Each run: a fresh database, chronoq's migrations, the variant's DDL, `--jobs` no-op jobs written
by COPY, VACUUM ANALYZE and CHECKPOINT; then one connection claims `--batch` jobs and finishes
them, with chronoq's own statements (`job_claim`, `job_complete_many`, prepared), until none is
left. What it reports per job:

```
 server µs   CPU time of that connection's backend process (/proc), the work itself
 jobs/s      the drain's rate on that one connection (client and server taking turns)
```

WAL volume is not reported: after the checkpoint each page's first change logs the whole page,
and those images, not the index entries, decide the bytes a drain writes.

Variants run interleaved (one run of each, `--repeats` times, each round starting at the next
variant) so a busy moment hits them all alike, and the report gives the median and the range.
What an index serves is not measured here: the table says what leaving it out would break.
Writes `schema_cost.md` and `.json` beside this module (`--out DIR` elsewhere); `--smoke` runs
a few hundred jobs and writes nowhere unless told.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.cpu import process_seconds
from bench.harness import drop_database
from bench.standalone import admin_dsn, migrated_database, run_settings, write_report
from bench.systems.bare_sql import claim_args, finish_args
from bench.systems.sql import Q as BENCH_Q
from bench.systems.sql import copy_noop_jobs
from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.postgres")
DATABASE = "chronoq_schema_cost"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Variant:
    name: str
    ddl: tuple[str, ...]
    # What the statement or feature that needs the dropped object would lose.
    serves: str


VARIANTS = (
    Variant("as shipped", (), "-"),
    Variant(
        "without chronoq_jobs_status_idx",
        ("DROP INDEX chronoq_jobs_status_idx",),
        "job listings by status, newest first (dead letters, `chronoq jobs list --status`)",
    ),
    Variant(
        "without chronoq_jobs_finished_idx",
        ("DROP INDEX chronoq_jobs_finished_idx",),
        "the pruner's oldest finished jobs; the dashboard's recently finished",
    ),
    Variant(
        "without chronoq_jobs_running_queue_idx",
        ("DROP INDEX chronoq_jobs_running_queue_idx",),
        "counting a queue's running jobs under a concurrency limit",
    ),
    Variant(
        "without chronoq_jobs_lease_idx",
        ("DROP INDEX chronoq_jobs_lease_idx",),
        "the claim's next lease expiry and the rescuer: a scan of the table per claim without it",
    ),
    Variant(
        "without the notify-on-update trigger",
        ("DROP TRIGGER chronoq_jobs_notify_update ON chronoq_jobs",),
        "waking workers when a retry, requeue or rescue makes a job pending",
    ),
    Variant(
        "without the notify-finished trigger",
        ("DROP TRIGGER chronoq_jobs_notify_finished ON chronoq_jobs",),
        "waking `App.wait` when a job ends",
    ),
    Variant(
        "floor: only the indexes the claim reads, no triggers",
        (
            "DROP TRIGGER chronoq_jobs_notify_update ON chronoq_jobs",
            "DROP TRIGGER chronoq_jobs_notify_finished ON chronoq_jobs",
            "DROP TRIGGER chronoq_jobs_notify_insert ON chronoq_jobs",
            "DROP INDEX chronoq_jobs_status_idx",
            "DROP INDEX chronoq_jobs_finished_idx",
            "DROP INDEX chronoq_jobs_running_queue_idx",
            "DROP INDEX chronoq_jobs_live_key_idx",
            "DROP INDEX chronoq_jobs_tick_idx",
        ),
        # The claim statement itself reads the claim, next-due and lease indexes: without the
        # last two its wake-up columns scan the table on every claim.
        "keys, ticks, listings, the pruner, limits and every wake-up: the floor, not a design",
    ),
)


@dataclass(frozen=True)
class Run:
    server_us: float
    jobs_per_s: float


def fresh_database(admin: str, database: str, variant: Variant, jobs: int) -> str:
    dsn = migrated_database(admin, database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in variant.ddl:
            conn.execute(statement.encode())
        copy_noop_jobs(conn, jobs)
        conn.execute(BENCH_Q["vacuum_analyze"])
        conn.execute(BENCH_Q["checkpoint"])
    return dsn


def drain(dsn: str, jobs: int, batch: int) -> Run:
    args = claim_args(batch, worker_id="schema-cost")
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        backend = conn.info.backend_pid
        cpu_before = process_seconds(backend)
        started = time.perf_counter()
        done = 0
        while True:
            rows = conn.execute(Q["job_claim"], args, prepare=True, binary=True).fetchall()
            claimed = [row for row in rows if row["id"] is not None]
            if not claimed:
                break
            finished = conn.execute(
                Q["job_complete_many"], finish_args(claimed), prepare=True
            ).fetchall()
            done += len(finished)
        seconds = time.perf_counter() - started
        cpu = process_seconds(backend) - cpu_before
    if done != jobs:
        raise RuntimeError(f"drained {done} jobs of {jobs}")
    return Run(cpu / jobs * 1e6, jobs / seconds)


def measure(
    variants: Sequence[Variant],
    jobs: int,
    batch: int,
    repeats: int,
    admin: str,
    database: str = DATABASE,
) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {variant.name: [] for variant in variants}
    try:
        for repeat in range(repeats):
            # Each round starts at another variant: the first run after a database is dropped
            # and made ran slower than the rest, whatever its variant.
            shift = repeat % len(variants)
            for variant in [*variants[shift:], *variants[:shift]]:
                dsn = fresh_database(admin, database, variant, jobs)
                run = drain(dsn, jobs, batch)
                runs[variant.name].append(run)
                print(
                    f"[{repeat + 1}/{repeats}] {variant.name}: {run.server_us:.1f} µs per job, "
                    f"{run.jobs_per_s:,.0f} jobs/s",
                    flush=True,
                )
    finally:
        drop_database(admin, database)
    return runs


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def report(
    variants: Sequence[Variant], runs: dict[str, list[Run]], settings: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    base = statistics.median(r.server_us for r in runs[variants[0].name])
    rows = []
    for variant in variants:
        server = summary([r.server_us for r in runs[variant.name]])
        rate = summary([r.jobs_per_s for r in runs[variant.name]])
        rows.append(
            {
                "variant": asdict(variant),
                "server_us": server,
                "jobs_per_s": rate,
                "server_saved_us": base - server["median"],
            }
        )
    results = {"settings": settings, "rows": rows}
    lines = [
        "# What each index and trigger of chronoq_jobs costs per job",
        "",
        f"`python -m bench.schema_cost` on {settings['machine']}, {settings['date']}, commit "
        f"{settings['commit']}: {settings['jobs']:,} jobs claimed {settings['batch']} at a time "
        f"and finished on one connection, {settings['repeats']} runs of each variant "
        "interleaved; server µs is the backend's CPU time per job, median (min–max).",
        "",
        "| variant | server µs per job | saved | jobs/s (one connection) | what leaving it out "
        "breaks |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        server, rate = row["server_us"], row["jobs_per_s"]
        lines.append(
            f"| {row['variant']['name']} | {server['median']:.1f} ({server['min']:.1f}–"
            f"{server['max']:.1f}) | {row['server_saved_us']:.1f} | {rate['median']:,.0f} | "
            f"{row['variant']['serves']} |"
        )
    return "\n".join(lines) + "\n", results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.schema_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a few hundred jobs, one run")
    parser.add_argument("--out", type=Path, help="where the report goes (default bench/)")
    args = parser.parse_args(argv)
    jobs, repeats = (300, 1) if args.smoke else (args.jobs, args.repeats)
    runs = measure(VARIANTS, jobs, args.batch, repeats, admin_dsn())
    settings = run_settings(admin_dsn(), jobs=jobs, batch=args.batch, repeats=repeats)
    text, results = report(VARIANTS, runs, settings)
    print(text)
    write_report(
        args.out if args.out else (None if args.smoke else HERE), "schema_cost", text, results
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
