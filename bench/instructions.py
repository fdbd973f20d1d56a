"""`python -m bench.instructions`: the CPU instructions a worker spends per job, counted.

On a shared or busy machine, CPU seconds per job move by tens of percent from run to run; the
number of instructions a process executes does not. This runs each worker under valgrind's
callgrind (which counts every instruction of every thread of the process, the Python
interpreter's, psycopg's and libpq's included, and nothing of the PostgreSQL server), draining
`--small` and then `--large` no-op jobs from a fresh database, and reports

    (instructions for large - instructions for small) ÷ (large - small)

so start-up (imports, connecting, migrations check) cancels out and what remains is the cost of
one more job. Callgrind slows a process about fifty-fold, which changes how much of a drain
overlaps the database's work but not what the worker executes per job: a claim of a full batch
is the same work at any speed. The same count taken twice agrees to about 0.1%.

Workers (one process, one batch size, `--batch`, 100 by default):

    chronoq     a `chronoq.Worker` (concurrency 100, burst mode: it stops when the queue is empty)
                running an async no-op handler, as the drain figure's workers do, on the event
                loop `--event-loop` names (auto: uvloop when installed, as in .venv-bench)
    store       chronoq's store methods alone, claim and finish in a loop: the worker without
                its event loop, handlers, leases and events
    bare-sql    the bare SQL loop of the drain figure (bench/systems/bare_sql.py): chronoq's
                statements in a plain psycopg loop, the limit of the design

Needs `valgrind` on the PATH (Debian's valgrind package) and a PostgreSQL server
(`CHRONOQ_BENCH_DSN`). Prints a table; `--json FILE` keeps the counts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from bench.harness import drop_database
from bench.standalone import admin_dsn, migrated_database
from bench.systems.sql import Q as BENCH_Q
from chronoq.worker.loops import EVENT_LOOPS

WORKERS = ("chronoq", "store", "bare-sql")
DATABASE = "chronoq_instructions"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Count:
    worker: str
    batch: int
    small: int
    large: int
    instructions_small: int
    instructions_large: int

    @property
    def per_job(self) -> float:
        return (self.instructions_large - self.instructions_small) / (self.large - self.small)


def fill(admin: str, jobs: int) -> str:
    """A fresh database with chronoq's schema and `jobs` due no-op jobs; its DSN."""
    from chronoq import App, JobSpec

    dsn = migrated_database(admin, DATABASE)
    app = App(dsn, pool_size=1)
    try:
        app.enqueue_many(JobSpec("noop") for _ in range(jobs))
    finally:
        app.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(BENCH_Q["vacuum_analyze"])
    return dsn


def counted(worker: str, dsn: str, batch: int, out_dir: Path, event_loop: str = "auto") -> int:
    """Instructions callgrind counted in one drain by `worker`."""
    out = out_dir / f"callgrind.{worker}.out"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "bench.instructions",
        "--serve",
        worker,
        "--dsn",
        dsn,
        "--batch",
        str(batch),
        "--event-loop",
        event_loop,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{worker} under callgrind exited {done.returncode}:\n{done.stderr}")
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise RuntimeError(f"callgrind printed no total for {worker}:\n{done.stderr[-2000:]}")


def measure(
    workers: Sequence[str], batch: int, small: int, large: int, admin: str, event_loop: str = "auto"
) -> list[Count]:
    counts = []
    with tempfile.TemporaryDirectory(prefix="chronoq-instructions-") as tmp:
        for worker in workers:
            totals = []
            for jobs in (small, large):
                dsn = fill(admin, jobs)
                totals.append(counted(worker, dsn, batch, Path(tmp), event_loop))
                left = _left(dsn)
                if left:
                    raise RuntimeError(f"{worker} left {left} of {jobs} jobs unfinished")
            counts.append(Count(worker, batch, small, large, totals[0], totals[1]))
            print(f"{worker}: {counts[-1].per_job:,.0f} instructions per job", flush=True)
    drop_database(admin, DATABASE)
    return counts


def _left(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(b"SELECT count(*) FROM chronoq_jobs WHERE status <> 'done'").fetchone()
    return int(row[0]) if row else 0


def table(counts: Sequence[Count]) -> str:
    bare = next((c.per_job for c in counts if c.worker == "bare-sql"), None)
    lines = [
        "| worker | batch | instructions per job | ÷ bare SQL loop |",
        "|---|---:|---:|---:|",
    ]
    for count in counts:
        ratio = f"{count.per_job / bare:.2f}" if bare else "-"
        lines.append(f"| {count.worker} | {count.batch} | {count.per_job:,.0f} | {ratio} |")
    return "\n".join(lines)


# -- the workers, run under callgrind ------------------------------------------------------


def serve(worker: str, dsn: str, batch: int, event_loop: str = "auto") -> None:
    if worker == "chronoq":
        _serve_chronoq(dsn, batch, event_loop)
    elif worker == "store":
        _serve_store(dsn, batch)
    else:
        _serve_bare(dsn, batch)


def _serve_chronoq(dsn: str, batch: int, event_loop: str) -> None:
    from chronoq import App, Worker, WorkerOptions

    app = App(dsn, pool_size=4)

    @app.task(max_attempts=3)
    async def noop() -> None:
        pass

    options = WorkerOptions(
        concurrency=100, batch_size=batch, burst=True, event_loop=event_loop, tune_gc=True
    )
    Worker(app, options).run(install_signal_handlers=False)
    app.close()


def _serve_store(dsn: str, batch: int) -> None:
    from chronoq import App
    from chronoq.core.jobs import Outcome
    from chronoq.storage.base import JobClaimParams, JobFinishParams

    app = App(dsn, pool_size=1)
    params = JobClaimParams(
        queues=["default"],
        limit=batch,
        worker_id="instructions",
        leases={"noop": 60.0},
        max_attempts={"noop": 3},
    )
    while jobs := app.store.job_claim_with_wakeup(params).jobs:
        app.store.job_finish_many(
            [JobFinishParams(j.id, j.lease_token, Outcome.DONE) for j in jobs]
        )
    app.close()


def _serve_bare(dsn: str, batch: int) -> None:
    from psycopg.rows import dict_row

    from bench.systems.bare_sql import Q, claim_args, finish_args

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        args = claim_args(batch)
        while True:
            rows = conn.execute(Q["job_claim"], args, prepare=True, binary=True).fetchall()
            rows = [row for row in rows if row["id"] is not None]
            if not rows:
                return
            conn.execute(Q["job_complete_many"], finish_args(rows), prepare=True).fetchall()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--workers", default=",".join(WORKERS))
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=2500)
    parser.add_argument("--json", type=Path, help="write the counts to this file")
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="the chronoq worker's event loop (auto: uvloop when installed)",
    )
    parser.add_argument("--serve", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.dsn, args.batch, args.event_loop)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not on the PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    workers = [name for name in args.workers.split(",") if name]
    unknown = sorted(set(workers) - set(WORKERS))
    if unknown or args.large <= args.small:
        print(f"workers from {', '.join(WORKERS)}; --large above --small", file=sys.stderr)
        return 2
    counts = measure(workers, args.batch, args.small, args.large, admin_dsn(), args.event_loop)
    print(table(counts))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) | {"per_job": c.per_job} for c in counts]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
