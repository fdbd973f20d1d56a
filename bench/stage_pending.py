"""`python -m bench.stage_pending`: what a partition leader's staging costs as pending jobs pile
up, the sizing model's 10M-pending case measured instead of modelled.

A fresh database with chronoq's migrations grows, step by step, to `--sizes` pending jobs
(default 100,000, 1,000,000 and 10,000,000), each falling due at a random instant of the next
24 hours (deferred work: mostly far from due). At each size, on one connection, the store's own
`job_stage_candidates` is run as a leader of every partition runs it (16 partitions, pages of
1,000 rows in id order, as the stager reads):

- a full pass over a `--horizon` of 60 s and one of 5 s: every pending job due within it (at 24 h
  of jobs, about N * horizon / 86,400 rows);
- a near pass: the ids above the last 1,000 (the new jobs a NOTIFY names).

`--page` sets the rows a read (default: the leader's own, `TierOptions.stage_batch`).

For each: the median time of `--repeats` passes and the backend's CPU per pass (/proc). Writes
`stage_pending.md` and `.json` beside this module (`--out DIR` elsewhere); `--smoke` runs small
sizes and writes nowhere unless told.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.cpu import process_seconds
from bench.harness import drop_database
from bench.standalone import admin_dsn, migrated_database, run_settings, write_report
from bench.systems.sql import Q as BENCH_Q
from chronoq.storage.base import JobStageParams
from chronoq.storage.postgres.store import PostgresStore
from chronoq.tier.options import TierOptions

DATABASE = "chronoq_stage_pending"
HERE = Path(__file__).resolve().parent
PARTITIONS = 16
INSERT_CHUNK = 1_000_000


@dataclass(frozen=True)
class Pass:
    pending: int
    kind: str  # "full 60 s", "full 5 s", "near"
    rows: int
    median_ms: float
    cpu_ms: float


def grow(conn: psycopg.Connection[Any], have: int, want: int) -> None:
    while have < want:
        count = min(INSERT_CHUNK, want - have)
        conn.execute(BENCH_Q["stage_pending_insert"], {"count": count, "hours": 24})
        have += count
    conn.execute(BENCH_Q["stage_pending_analyze"])


def one_pass(store: PostgresStore, horizon: float, after_id: int, page_size: int) -> int:
    """A leader's pass: pages of `page_size` rows in id order until a short page; the rows read."""
    rows, cursor = 0, after_id
    while True:
        params = JobStageParams(
            list(range(PARTITIONS)), PARTITIONS, timedelta(seconds=horizon), cursor, page_size
        )
        page = store.job_stage_candidates(params).rows
        rows += len(page)
        if len(page) < page_size:
            return rows
        cursor = page[-1].id


def timed(
    store: PostgresStore, pid: int, horizon: float, after_id: int, repeats: int, page_size: int
) -> Any:
    took, rows = [], 0
    cpu = process_seconds(pid)
    for _ in range(repeats):
        started = time.perf_counter()
        rows = one_pass(store, horizon, after_id, page_size)
        took.append(time.perf_counter() - started)
    return rows, statistics.median(took) * 1e3, (process_seconds(pid) - cpu) / repeats * 1e3


def measure(
    sizes: Sequence[int],
    horizon: float,
    repeats: int,
    page_size: int,
    admin: str,
    database: str = DATABASE,
) -> list[Pass]:
    dsn = migrated_database(admin, database)
    passes: list[Pass] = []
    store = PostgresStore(dsn, pool_size=1)
    try:
        with psycopg.connect(dsn, autocommit=True) as loader:
            have = 0
            for size in sizes:
                grow(loader, have, size)
                have = size
                passes += measure_size(store, loader, size, horizon, repeats, page_size)
    finally:
        store.close()
        drop_database(admin, database)
    return passes


def measure_size(
    store: PostgresStore,
    loader: psycopg.Connection[Any],
    size: int,
    horizon: float,
    repeats: int,
    page_size: int,
) -> list[Pass]:
    one_pass(store, horizon, 0, page_size)  # the store's one pooled connection is open now
    row = loader.execute(BENCH_Q["stage_pending_backend"]).fetchone()
    assert row is not None
    pid, max_id = int(row[0]), int(row[1])
    found = []
    for kind, window, after in (
        (f"full {horizon:g} s", horizon, 0),
        ("full 5 s", 5.0, 0),
        ("near", horizon, max_id - 1000),
    ):
        rows, median_ms, cpu_ms = timed(store, pid, window, after, repeats, page_size)
        found.append(Pass(size, kind, rows, median_ms, cpu_ms))
        print(
            f"{size:>11,} pending  {kind:<10} {rows:>7,} rows  {median_ms:8.2f} ms  "
            f"backend CPU {cpu_ms:8.2f} ms",
            flush=True,
        )
    return found


def report(passes: list[Pass], settings: dict[str, Any]) -> str:
    lines = [
        "# What a leader's staging costs as pending jobs pile up",
        "",
        f"`python -m bench.stage_pending` on {settings['machine']}, {settings['date']}, commit "
        f"{settings['commit']}: pending jobs due at random over the next 24 hours, one leader "
        f"of {PARTITIONS} partitions reading pages of {settings['page']:,} rows on one "
        "connection, "
        f"{settings['repeats']} passes a line.",
        "",
        "| pending jobs | pass | rows read | median time, ms | backend CPU a pass, ms |",
        "|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {p.pending:,} | {p.kind} | {p.rows:,} | {p.median_ms:.2f} | {p.cpu_ms:.2f} |"
        for p in passes
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stage_pending", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--horizon", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--page", type=int, default=TierOptions().stage_batch, help="rows a staging read"
    )
    parser.add_argument("--smoke", action="store_true", help="small sizes, written nowhere")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [1_000, 5_000] if args.smoke else [int(s) for s in args.sizes.split(",")]
    admin = admin_dsn()
    passes = measure(sizes, args.horizon, 2 if args.smoke else args.repeats, args.page, admin)
    settings = run_settings(admin, repeats=args.repeats, sizes=sizes, page=args.page)
    out = args.out if args.out is not None or args.smoke else HERE
    write_report(
        out,
        "stage_pending",
        report(passes, settings),
        {"settings": settings, "passes": [asdict(p) for p in passes]},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
