"""`python -m bench`: run the suite and write RESULTS.md, results.json and the charts.

`--smoke` runs every figure with a few hundred jobs, once, into a temporary folder: it proves
the harness and every system's adapter still work, and its figures mean nothing.

`--figures herd --merge bench/results.json` runs one figure and puts its rows into an earlier
run's results (replacing that figure's rows only), then writes RESULTS.md and the charts again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench import report
from bench.harness import BENCH_DB, FIGURES, BenchError, Settings, run, temporary_work_dir
from bench.machine import describe
from bench.merge import MergeError, merge
from bench.systems import MODULES

DEFAULT_SYSTEMS = (
    "chronoq",
    "chronoq-sqlite",
    "bare-sql",
    "bare-sqlite",
    "pgqueuer",
    "procrastinate",
    "saq",
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny job counts, one run each")
    parser.add_argument("--repeats", type=int, help="runs per figure (default 3, smoke 1)")
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help=f"comma-separated, from: {', '.join(MODULES)}",
    )
    parser.add_argument(
        "--figures",
        default=",".join(FIGURES),
        help=f"comma-separated, from: {', '.join(FIGURES)} (default: all)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        metavar="RESULTS_JSON",
        help="put the figures run into this earlier results.json (their rows only) and write "
        "the report beside it (or to --out)",
    )
    parser.add_argument("--out", type=Path, help="where results go (default bench/)")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS_JSON",
        help="measure nothing: write RESULTS.md and the charts again from a results.json",
    )
    parser.add_argument(
        "--admin-dsn",
        default=os.environ.get(
            "CHRONOQ_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL DSN allowed to create databases (env CHRONOQ_BENCH_DSN)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("CHRONOQ_BENCH_REDIS", "redis://127.0.0.1:6379/14"),
        help="a Redis database the suite may flush (env CHRONOQ_BENCH_REDIS)",
    )
    parser.add_argument(
        "--steady-rate",
        type=positive_rate,
        metavar="JOBS_PER_S",
        help="the steady stream's rate (figure 10) when drain does not run beside it; with "
        "drain it is half each system's best drain rate (default 2000, smoke 150)",
    )
    parser.add_argument(
        "--database",
        default=os.environ.get("CHRONOQ_BENCH_DATABASE", BENCH_DB),
        help="the database the suite drops and creates for each measurement, so two runs on "
        f"one server can keep apart (env CHRONOQ_BENCH_DATABASE, default {BENCH_DB})",
    )
    return parser.parse_args(argv)


def positive_rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs per second: {text!r}") from None
    if not rate > 0 or rate == float("inf"):
        raise argparse.ArgumentTypeError(f"a rate must be a positive number of jobs/s: {text!r}")
    return rate


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.render:
        results = json.loads(args.render.read_text(encoding="utf-8"))
        report.write(results, args.out or args.render.parent)
        return 0
    systems = _names(args.systems)
    unknown = [name for name in systems if name not in MODULES]
    if unknown:
        print(f"unknown system(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    work_dir = temporary_work_dir()
    common = {
        "systems": systems,
        "figures": _names(args.figures),
        "admin_dsn": args.admin_dsn,
        "redis_url": args.redis_url,
        "database": args.database,
        "work_dir": work_dir,
        "log": lambda line: print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True),
    }
    if args.repeats:
        common["repeats"] = args.repeats
    if args.steady_rate:
        common["steady_rate"] = args.steady_rate
        common["steady_max_rate"] = None  # a rate asked for is the rate run, smoke or not
    settings = Settings.tiny(**common) if args.smoke else Settings.full(**common)
    try:
        results = run(settings)
    except BenchError as exc:
        print(f"benchmark failed: {exc}\n(worker logs in {work_dir})", file=sys.stderr)
        return 1
    results["machine"] = describe(args.admin_dsn, args.redis_url)
    if args.merge:
        try:
            results = merge(json.loads(args.merge.read_text(encoding="utf-8")), results)
        except MergeError as exc:
            print(f"cannot merge into {args.merge}: {exc}", file=sys.stderr)
            return 1
    out = args.out or _default_out(args, work_dir)
    report.write(results, out, settings.log)
    failed = [c for c in report.check_targets(results) if c.met is False]
    if failed and not args.smoke:
        settings.log("targets not met: " + "; ".join(f"{c.name} {c.measured}" for c in failed))
    return 0


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _default_out(args: argparse.Namespace, work_dir: Path) -> Path:
    """Beside the results merged into; a smoke run's own folder; else bench/."""
    if args.merge:
        return Path(args.merge).parent
    return work_dir / "results" if args.smoke else Path(__file__).parent


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
