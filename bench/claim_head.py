"""`python -m bench.claim_head`: what the jobs claimed since the last vacuum cost each claim.

A claim takes the due jobs of a queue in `run_at` order from the left of
`chronoq_jobs_claim_idx (queue, priority, run_at, id) WHERE status = 'pending'`. Claiming a job
updates its row, and the index entry of its pending version stays where it was until VACUUM
removes it: PostgreSQL marks such entries dead as scans pass them, but a scan still reads their
pages, and new jobs are inserted at the right end, so no page split ever clears the left end.
Every claim therefore steps over the entries of every job claimed since the last vacuum. This
measures how much that costs, and what a VACUUM gives back.

One run: a fresh database with chronoq's migrations, `--finished` finished jobs (a retention
window's worth of history, which sizes the table autovacuum sees) and as many due no-op jobs
as the marks need, VACUUM ANALYZE; then one connection claims `--batch` jobs and finishes them with
chronoq's own statements (`job_claim`, `job_complete_many`, prepared), autovacuum off for the
table. After a warm-up of WARM_UP claims and a VACUUM, at each mark (jobs claimed since that
vacuum) it takes a CHECKPOINT and times `--sample` claims: the median round trip of a claim and
its backend's CPU per claim (/proc, over the whole sample). After the last mark it runs VACUUM
(timed) and takes one more sample.

`--claim ids` measures tiered dispatch's claim the same way: `job_claim_staged`, the claim by
id a worker sends for the stream entries it read, given the next `--batch` pending jobs in id
order with their lease tokens (read beforehand, as a partition leader staged them), then the same
finish. It never walks the claim index, so what it shows is whether it pays for the jobs
claimed since the last vacuum some other way. `--claim db,ids` (the default) runs both, each on a
database of its own, and the report sets them side by side.

Writes `claim_head.md` and `.json` beside this module (`--out DIR` elsewhere); `--smoke` runs a
few hundred jobs and writes nowhere unless told.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from array import array
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
DATABASE = "chronoq_claim_head"
HERE = Path(__file__).resolve().parent
MARKS = (0, 25_000, 100_000, 250_000, 500_000)
WARM_UP = 20  # claims before the first mark


@dataclass(frozen=True)
class Sample:
    label: str
    claimed_since_vacuum: int
    claim_ms: float  # median round trip of one claim
    server_ms: float  # the backend's CPU per claim, over the sample


class Drainer:
    """One connection claiming and finishing with chronoq's statements: `job_claim` (db
    dispatch) or, given the pending jobs' ids and tokens in the order to claim them,
    `job_claim_staged` (tiered dispatch's claim by id)."""

    def __init__(
        self,
        conn: psycopg.Connection[dict[str, Any]],
        batch: int,
        staged: tuple[array[int], array[int]] | None = None,
    ) -> None:
        self.conn = conn
        self.backend = conn.info.backend_pid
        self.claimed = 0
        self.batch = batch
        self.args = claim_args(batch, worker_id="claim-head")
        self.staged = staged
        self.next = 0  # the next staged job to claim

    def _claim(self) -> list[dict[str, Any]]:
        if self.staged is None:
            return self.conn.execute(
                Q["job_claim"], self.args, prepare=True, binary=True
            ).fetchall()
        ids, tokens = self.staged
        taken = slice(self.next, self.next + self.batch)
        self.next += self.batch
        args = {k: v for k, v in self.args.items() if k not in ("queues", "limit")}
        args |= {"ids": list(ids[taken]), "tokens": list(tokens[taken])}
        rows = self.conn.execute(Q["job_claim_staged"], args, prepare=True, binary=True)
        return [row for row in rows.fetchall() if row["verdict"] == "job"]

    def round(self) -> float:
        """Claim a batch and finish it; the claim's round trip, in seconds."""
        started = time.perf_counter()
        rows = self._claim()
        took = time.perf_counter() - started
        claimed = [row for row in rows if row["id"] is not None]
        if not claimed:
            raise RuntimeError(f"the queue ran out after {self.claimed} claimed jobs")
        self.conn.execute(Q["job_complete_many"], finish_args(claimed), prepare=True).fetchall()
        self.claimed += len(claimed)
        return took

    def sample(self, label: str, since_vacuum: int, claims: int) -> Sample:
        # Every sample starts after a checkpoint, so each pays alike for the full-page images
        # of the first change to a page after one (a drain of 500,000 jobs brings several).
        self.conn.execute(BENCH_Q["checkpoint"])
        cpu_before = process_seconds(self.backend)
        took = [self.round() for _ in range(claims)]
        cpu = process_seconds(self.backend) - cpu_before
        return Sample(label, since_vacuum, statistics.median(took) * 1e3, cpu / claims * 1e3)


def fresh_database(admin: str, database: str, finished: int, pending: int) -> str:
    dsn = migrated_database(admin, database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(BENCH_Q["claim_head_no_autovacuum"])
        conn.execute(BENCH_Q["claim_head_finished"], {"count": finished})
        copy_noop_jobs(conn, pending)
        conn.execute(BENCH_Q["vacuum_analyze"])
        conn.execute(BENCH_Q["checkpoint"])
    return dsn


def staged_jobs(dsn: str) -> tuple[array[int], array[int]]:
    """The pending jobs' ids and lease tokens in id order: what a leader would stage."""
    ids, tokens = array("q"), array("q")
    with psycopg.connect(dsn) as conn, conn.cursor(name="staged") as cur:
        cur.execute(BENCH_Q["claim_head_staged"])
        for job_id, token in cur:
            ids.append(job_id)
            tokens.append(token)
    return ids, tokens


def measure(
    finished: int,
    marks: Sequence[int],
    batch: int,
    claims: int,
    admin: str,
    database: str = DATABASE,
    claim: str = "db",
) -> tuple[list[Sample], float]:
    """The samples at each mark and after a VACUUM, and the VACUUM's seconds; `claim` is
    `db` (job_claim) or `ids` (job_claim_staged)."""
    pending = marks[-1] + ((len(marks) + 1) * claims + WARM_UP) * batch
    dsn = fresh_database(admin, database, finished, pending)
    samples = []
    try:
        staged = staged_jobs(dsn) if claim == "ids" else None
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            drainer = Drainer(conn, batch, staged)
            # The first executions plan the claim anew each time (psycopg prepares it at the
            # fifth, and PostgreSQL settles on its generic plan after five more): warmed up,
            # then vacuumed, so the first mark measures the claim as a worker runs it.
            for _ in range(WARM_UP):
                drainer.round()
            _vacuum(conn)
            base = drainer.claimed
            for mark in marks:
                while drainer.claimed - base < mark:
                    drainer.round()
                samples.append(drainer.sample("no vacuum since", drainer.claimed - base, claims))
                print(_line(samples[-1]), flush=True)
            vacuum = _vacuum(conn)
            samples.append(drainer.sample("after VACUUM", 0, claims))
            print(_line(samples[-1]), f"(VACUUM {vacuum:.2f} s)", flush=True)
    finally:
        drop_database(admin, database)
    return samples, vacuum


def _vacuum(conn: psycopg.Connection[dict[str, Any]]) -> float:
    started = time.perf_counter()
    conn.execute(BENCH_Q["claim_head_vacuum"])
    return time.perf_counter() - started


def _line(sample: Sample) -> str:
    return (
        f"{sample.label} {sample.claimed_since_vacuum:,}: claim {sample.claim_ms:.2f} ms, "
        f"server {sample.server_ms:.2f} ms"
    )


def report(
    samples: Sequence[Sample],
    vacuum_s: float,
    settings: dict[str, Any],
    by_id: tuple[Sequence[Sample], float] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The table of one claim's samples; with `by_id` (the claim by id's samples and VACUUM),
    both side by side, row by row."""
    since_header = "| jobs claimed since the last vacuum "
    columns = "| claim, ms | server CPU a claim, ms | against the first "
    lines = [
        "# What the jobs claimed since the last vacuum cost each claim",
        "",
        f"`python -m bench.claim_head` on {settings['machine']}, {settings['date']}, commit "
        f"{settings['commit']}: a table of {settings['finished']:,} finished jobs and the due "
        f"ones, claimed {settings['batch']} at a time and finished on one connection, "
        f"autovacuum off for the table; each row is {settings['claims']} claims after a "
        "CHECKPOINT: the median round trip of one and the backend's CPU per claim.",
        "",
    ]
    if by_id is None:
        lines += [since_header + columns + "|", "|---|---:|---:|---:|"]
    else:
        lines += [
            "db dispatch's `job_claim` (the due jobs from the left of the claim index), then "
            "tiered dispatch's claim by id, `job_claim_staged` (the next jobs in id order with "
            "their lease tokens, as a leader stages them), each on a database of its own.",
            "",
            since_header + columns + columns.replace("| claim,", "| claim by id,") + "|",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
    others = list(by_id[0]) if by_id else []
    for n, sample in enumerate(samples):
        since = (
            f"{sample.claimed_since_vacuum:,}"
            if sample.label == "no vacuum since"
            else f"0, after a VACUUM of {vacuum_s:.2f} s"
            + (f" ({by_id[1]:.2f} s by id)" if by_id else "")
        )
        cells = [since, *_cells(sample, samples[0])]
        if others:
            cells += _cells(others[n], others[0])
        lines.append("| " + " | ".join(cells) + " |")
    results: dict[str, Any] = {
        "settings": settings,
        "vacuum_s": vacuum_s,
        "samples": [asdict(sample) for sample in samples],
    }
    if by_id:
        results["by_id"] = {
            "vacuum_s": by_id[1],
            "samples": [asdict(sample) for sample in by_id[0]],
        }
    return "\n".join(lines) + "\n", results


def _cells(sample: Sample, first: Sample) -> list[str]:
    ratio = sample.claim_ms / first.claim_ms if first.claim_ms else float("nan")
    return [f"{sample.claim_ms:.2f}", f"{sample.server_ms:.2f}", f"{ratio:.2f}×"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claim_head", description=__doc__)
    parser.add_argument("--finished", type=int, default=3_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sample", type=int, default=100, help="claims timed at each mark")
    parser.add_argument("--smoke", action="store_true", help="a few hundred jobs")
    parser.add_argument("--out", type=Path, help="where the report goes (default bench/)")
    parser.add_argument(
        "--claim",
        default="db,ids",
        choices=("db", "ids", "db,ids"),
        help="db: job_claim; ids: tiered's job_claim_staged; db,ids: both (default)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        finished, marks, batch, claims = 200, (0, 200), 10, 5
    else:
        finished, marks, batch, claims = args.finished, MARKS, args.batch, args.sample
    runs = {
        claim: measure(finished, marks, batch, claims, admin_dsn(), claim=claim)
        for claim in args.claim.split(",")
    }
    settings = run_settings(
        admin_dsn(), finished=finished, batch=batch, claims=claims, claim=args.claim
    )
    first, *rest = runs.values()
    text, results = report(*first, settings, rest[0] if rest else None)
    print(text)
    write_report(
        args.out if args.out else (None if args.smoke else HERE), "claim_head", text, results
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
