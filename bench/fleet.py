"""Figure 11, a fleet: tiered dispatch against db dispatch on the workload tiered exists for.

`python -m bench.fleet [--sizes 2x32,4x64,8x128] [--quick]`: for each fleet size (worker
processes times concurrency: slots) and each dispatch mode, on private servers
(`bench.tiered.stack`: PostgreSQL with pg_stat_statements, redis-server, one etcd member):

```
 fleet     `chronoq worker --app bench.fleet_app:app --processes P --concurrency C`; tiered adds
           one `chronoq scheduler` (its partition leader), CHRONOQ_DISPATCH=tiered, the tier's
           default settings (16 partitions, 60 s stage horizon, 5 s leader TTL)
 ready     every process registered in chronoq_processes, then a probe of `slots` jobs due at
           once has run (for tiered: the leader leads and stages)
 stream    async jobs that sleep 20-100 ms (uniform), due evenly at the offered rate, each
           enqueued about `--lead` seconds before it falls due, in ticks of 50 ms
           (App.enqueue_many); the offered rate is `--load` of what the slots can run
           (slots / mean sleep), at most `--max-rate`
 window    after `--warm-up` seconds of the stream (ANALYZE chronoq_jobs half-way through it),
           `--window` seconds: CPU of every process from /proc, pg_stat_statements and
           pg_stat_database, read at both ends; the jobs due within the window are the jobs
           the window ran
 after     every stream job finished (or the wait timed out): due→start lateness of the window's
           jobs (started_at - run_at, both on the database clock), jobs not finished (lost) and
           jobs started more than once (attempts > 1); both must be 0
```

Per job of the window: PostgreSQL CPU (the postmaster and every process it started), top-level
statements (pg_stat_statements) and commits (pg_stat_database), the CPU of the workers (the
supervisor and its children), the scheduler, redis-server and etcd, and of the producer (this
process: the enqueue and the figure's own reads). The machine's busy CPU over the window, less
all of these, is the load of whatever else ran on the machine meanwhile; the report states it.

The statement breakdown lists, per mode and fleet, the statements behind PostgreSQL's work per
job: calls, execution time and rows per job, each named after chronoq's own SQL where the text
matches. Writes `fleet.md`, `fleet.json` and `fleet.png` beside this module (`--out DIR`
elsewhere; `--quick` writes nowhere unless told).
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench import cpu, fleet_app, services
from bench.harness import ROOT, BenchError, latency_stats, temporary_work_dir
from bench.machine import describe
from bench.standalone import write_report
from bench.systems.sql import Q
from bench.tiered import DATABASE, MODES, Stack, fresh, scalar, settle, stack
from chronoq import JobSpec
from chronoq.config import Config
from chronoq.storage.sqlfile import load_dialect

HERE = Path(__file__).resolve().parent
APP = "bench.fleet_app:app"
TICK = 0.05  # seconds between two enqueue calls of the stream
POLL = 0.05
DEFAULT_SIZES = "2x32,4x64,8x128"
PARTITIONS = Config().partitions  # the tier's default, as a fleet started without settings has
STORE_SQL = load_dialect("chronoq.storage.postgres")


@dataclass(frozen=True)
class Size:
    processes: int
    concurrency: int

    @property
    def slots(self) -> int:
        return self.processes * self.concurrency

    @property
    def label(self) -> str:
        return f"{self.processes}×{self.concurrency}"

    @classmethod
    def parse(cls, text: str) -> Size:
        processes, _, concurrency = text.lower().partition("x")
        size = cls(int(processes), int(concurrency))
        if size.processes < 1 or size.concurrency < 1:
            raise ValueError(f"a fleet size is PROCESSESxCONCURRENCY, both ≥ 1: {text!r}")
        return size


@dataclass(frozen=True)
class Inputs:
    sizes: tuple[Size, ...]
    sleep_ms: tuple[int, int] = (20, 100)
    load: float = 0.5  # offered rate ÷ what the slots can run
    # One 2-core machine runs the fleet, PostgreSQL, Redis, etcd and the producer: near 800
    # jobs/s it had no core left, and lateness measured the wait for a CPU, not dispatch.
    max_rate: float = 600.0
    lead_s: float = 1.0
    warm_up_s: float = 8.0
    window_s: float = 20.0
    finish_timeout_s: float = 60.0
    top: int = 12  # statements listed per mode and fleet
    track_planning: bool = False  # pg_stat_statements times planning too (some overhead)
    # spread: each job due at its own instant, evenly at the offered rate; tick: the jobs of one
    # enqueue call (a tick of TICK seconds) all due at one instant, TICK apart.
    due: str = "spread"
    quick: bool = False

    def due_at(self, first: float, n: int, rate: float) -> float:
        """When the stream's job `n` falls due, `first` being the first job's instant."""
        if self.due == "tick":
            return first + math.floor(n / rate / TICK) * TICK
        return first + n / rate

    def capacity(self, size: Size) -> float:
        """Jobs/s the slots can run: slots / mean sleep."""
        return size.slots / (sum(self.sleep_ms) / 2 / 1000)

    def rate(self, size: Size) -> float:
        return round(min(self.load * self.capacity(size), self.max_rate), 1)

    @classmethod
    def quick_run(cls, sizes: tuple[Size, ...]) -> Inputs:
        return cls(sizes, max_rate=100.0, warm_up_s=2.0, window_s=3.0, quick=True)


# -- readings ------------------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    found = [pid]
    for child in cpu.children(pid):
        found.extend(tree(child))
    return found


def pid_of(command_part: str) -> int | None:
    """The process whose command line contains `command_part` (etcd: its client URL)."""
    needle = command_part.encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return None


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / cpu.TICKS


@dataclass(frozen=True)
class Statement:
    calls: int
    exec_ms: float
    rows: int
    plans: int
    plan_ms: float
    query: str


@dataclass
class Reading:
    """Counters at one instant: CPU seconds by process group, statements, commits."""

    at: float
    cpu: dict[str, float]
    busy: float
    statements: dict[tuple[int, bool], Statement]
    commits: int
    fetched: int


@dataclass
class Fleet:
    stack: Stack
    workers: subprocess.Popen[bytes]
    scheduler: subprocess.Popen[bytes] | None
    etcd_pid: int | None

    def cpu(self) -> dict[str, float]:
        seconds = {
            "postgres": self.stack.pg.cpu_seconds(),
            "workers": cpu.processes_seconds(tree(self.workers.pid)),
            "scheduler": (
                cpu.processes_seconds(tree(self.scheduler.pid)) if self.scheduler else 0.0
            ),
            "redis": cpu.process_seconds(self.stack.redis_pid),
            "etcd": cpu.process_seconds(self.etcd_pid) if self.etcd_pid else 0.0,
            "producer": cpu.process_seconds(os.getpid()),
        }
        return seconds

    def check_alive(self) -> None:
        for name, proc in (("worker", self.workers), ("scheduler", self.scheduler)):
            if proc is not None and proc.poll() is not None:
                raise BenchError(f"fleet: the {name} process exited with {proc.returncode}")


def read(fleet: Fleet, watch: psycopg.Connection[Any]) -> Reading:
    busy = machine_busy_seconds()
    at = time.time()
    seconds = fleet.cpu()
    watch.execute(Q["flush_stats"])
    statements = {
        (int(qid), bool(top)): Statement(
            int(calls), float(ms), int(rows), int(plans), float(plan_ms), str(query)
        )
        for qid, top, calls, ms, rows, plans, plan_ms, query in watch.execute(
            Q["fleet_statements"], {"db": DATABASE}
        )
    }
    row = watch.execute(Q["tier_database_activity"], {"db": DATABASE}).fetchone()
    commits, fetched = (int(row[0]), int(row[1])) if row else (0, 0)
    return Reading(at, seconds, busy, statements, commits, fetched)


# -- naming statements ---------------------------------------------------------------------

# What pg_stat_statements puts in place of parameters and constants, and what psycopg sends in
# place of its own placeholders, all become `?`.
_COMMENT = re.compile(r"--[^\n]*")
_CONSTANT = re.compile(r"%\(\w+\)s|%s|\$\d+|'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")


def _shape(sql: str) -> str:
    text = _CONSTANT.sub("?", _COMMENT.sub("", sql)).replace("%%", "%")
    # pg_stat_statements takes a negative constant's sign into its parameter.
    return re.sub(r"\s+", "", text).lower().replace("-?", "?")


_SHAPES = {name: _shape(sql) for name, sql in STORE_SQL.items()}


def statement_name(query: str) -> str:
    """The name of chronoq's statement this text is (`jobs.sql`'s `-- name:`), else its start."""
    shape = _shape(query)
    for name, known in _SHAPES.items():
        if known == shape:
            return name
    # Else the nearest, if near enough (a constant written in a way the shapes do not agree on).
    best, name = max(
        (difflib.SequenceMatcher(None, shape, known, autojunk=False).ratio(), name)
        for name, known in _SHAPES.items()
    )
    return name if best >= 0.95 else " ".join(query.split())[:70]


# -- one run -------------------------------------------------------------------------------


def _env(stack: Stack, dispatch: str) -> dict[str, str]:
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "CHRONOQ_DSN": stack.dsn,
        "CHRONOQ_DISPATCH": dispatch,
    }
    if dispatch == "tiered":
        env |= {
            "CHRONOQ_REDIS_URL": stack.redis_url,
            "CHRONOQ_ETCD_ENDPOINTS": stack.etcd,
            "CHRONOQ_PARTITIONS": str(PARTITIONS),
        }
    return env


def _settings(stack: Stack, dispatch: str) -> dict[str, Any]:
    """The producer's App settings: those the fleet's processes take from the environment."""
    settings: dict[str, Any] = {"dsn": stack.dsn, "dispatch": dispatch}
    if dispatch == "tiered":
        settings |= {
            "redis_url": stack.redis_url,
            "etcd_endpoints": stack.etcd,
            "partitions": PARTITIONS,
        }
    return settings


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "chronoq", *argv, "--app", APP, "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@contextmanager
def started(stack: Stack, dispatch: str, size: Size, work: Path) -> Iterator[Fleet]:
    env = _env(stack, dispatch)
    tag = f"{dispatch}-{size.processes}x{size.concurrency}"
    worker_argv = ["worker", "--processes", str(size.processes)]
    workers = _spawn(
        [*worker_argv, "--concurrency", str(size.concurrency)], env, work / f"fleet-{tag}-w.log"
    )
    scheduler = None
    try:
        if dispatch == "tiered":
            scheduler = _spawn(["scheduler"], env, work / f"fleet-{tag}-s.log")
        yield Fleet(stack, workers, scheduler, pid_of(stack.etcd) if stack.etcd else None)
    finally:
        if scheduler is not None:
            services.end(scheduler, timeout=60)
        services.end(workers, timeout=60)


def wait_ready(
    fleet: Fleet, watch: psycopg.Connection[Any], size: Size, dispatch: str, app: Any
) -> int:
    """Every process registered, then a probe of `slots` jobs due at once has run; the
    highest job id so far (the stream's jobs come after it)."""
    wanted = {"worker": size.processes} | ({"scheduler": 1} if dispatch == "tiered" else {})
    deadline = time.monotonic() + 60 + 5 * size.processes
    for kind, count in wanted.items():
        while int(scalar(watch, "fleet_processes", kind=kind)) < count:
            fleet.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"fleet: fewer than {count} {kind} process(es) registered")
            time.sleep(POLL)
    at = datetime.fromtimestamp(float(scalar(watch, "tier_db_now")) + 0.3, UTC)
    probes = app.enqueue_many(
        JobSpec(fleet_app.TASK, {"ms": 20}, run_at=at) for _ in range(size.slots)
    )
    after = min(p.id for p in probes) - 1
    while int(scalar(watch, "fleet_finished", after=after)) < len(probes):
        fleet.check_alive()
        if time.monotonic() > deadline + 60:
            raise BenchError(f"fleet: the {len(probes)} probe jobs did not all run")
        time.sleep(POLL)
    return int(scalar(watch, "fleet_max_id"))


@dataclass
class Run:
    size: Size
    dispatch: str
    rate: float
    capacity: float
    jobs: int  # the stream's
    window_jobs: int
    start: Reading
    end: Reading
    lateness: list[float]
    lost: int
    twice: int
    behind_s: float  # how far the enqueue fell behind its ticks at worst
    log: list[str] = field(default_factory=list)


def stream(
    fleet: Fleet,
    watch: psycopg.Connection[Any],
    db_watch: psycopg.Connection[Any],
    app: Any,
    inputs: Inputs,
    rate: float,
) -> tuple[int, float, Reading, Reading, float, float]:
    """Enqueue the stream; read the counters at the window's two ends. Returns the jobs, the
    first due instant, the two readings, the window's start and how far the enqueue fell
    behind at worst."""
    seconds = inputs.warm_up_s + inputs.window_s
    jobs = round(rate * seconds)
    rng = random.Random(11)
    lo, hi = inputs.sleep_ms
    first = float(scalar(db_watch, "tier_db_now")) + inputs.lead_s + 0.2
    begin = first - inputs.lead_s  # local clock = database clock: one machine
    window_start = first + inputs.warm_up_s
    window_end = window_start + inputs.window_s
    analyze_at = first + inputs.warm_up_s / 2
    readings: list[Reading] = []
    analyzed = False
    behind = 0.0
    done, tick = 0, 0
    while done < jobs or len(readings) < 2:
        due = begin + tick * TICK
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        behind = max(behind, -wait)
        upto = min(jobs, round((tick + 1) * TICK * rate))
        if upto > done:
            app.enqueue_many(
                JobSpec(
                    fleet_app.TASK,
                    {"ms": rng.randint(lo, hi)},
                    run_at=datetime.fromtimestamp(inputs.due_at(first, n, rate), UTC),
                )
                for n in range(done, upto)
            )
            done = upto
        now = time.time()
        if not analyzed and now >= analyze_at:
            db_watch.execute(Q["fleet_analyze"])
            analyzed = True
        if len(readings) < 2 and now >= (window_start, window_end)[len(readings)]:
            readings.append(read(fleet, watch))
        fleet.check_alive()
        tick += 1
    return jobs, first, readings[0], readings[1], window_start, behind


def run_once(stack: Stack, size: Size, dispatch: str, inputs: Inputs, work: Path) -> Run:
    fresh(stack, dispatch, partitions=PARTITIONS)
    settle(stack.dsn)
    rate = inputs.rate(size)
    app = fleet_app.build(**_settings(stack, dispatch))
    try:
        with (
            started(stack, dispatch, size, work) as fleet,
            psycopg.connect(stack.pg.admin_dsn, autocommit=True) as watch,
            psycopg.connect(stack.dsn, autocommit=True) as db_watch,
        ):
            after = wait_ready(fleet, db_watch, size, dispatch, app)
            jobs, first, start, end, window_start, behind = stream(
                fleet, watch, db_watch, app, inputs, rate
            )
            deadline = time.monotonic() + inputs.finish_timeout_s
            while int(scalar(db_watch, "fleet_finished", after=after)) < jobs:
                if time.monotonic() > deadline:
                    break
                fleet.check_alive()
                time.sleep(POLL)
            finished, twice, total = db_watch.execute(
                Q["fleet_outcome"], {"after": after}
            ).fetchone() or (0, 0, 0)
            window = {"after": after, "start": window_start, "end": window_start + inputs.window_s}
            late = [float(r[0]) for r in db_watch.execute(Q["fleet_lateness"], window)]
    finally:
        app.close()
    window_jobs = sum(
        1 for n in range(jobs) if window_start <= inputs.due_at(first, n, rate) < window["end"]
    )
    return Run(
        size,
        dispatch,
        rate,
        inputs.capacity(size),
        jobs,
        window_jobs,
        start,
        end,
        late,
        lost=max(jobs, int(total)) - int(finished),
        twice=int(twice),
        behind_s=behind,
    )


# -- results -------------------------------------------------------------------------------

OTHER = ("workers", "scheduler", "redis", "etcd")


def summarise(run: Run, top: int) -> dict[str, Any]:
    jobs = run.window_jobs
    spent = {k: run.end.cpu[k] - run.start.cpu[k] for k in run.start.cpu}
    seconds = run.end.at - run.start.at
    busy = run.end.busy - run.start.busy
    per_job = {k: v / jobs * 1e6 for k, v in spent.items()}
    # Deltas over the window, one row per statement name (a statement sent by two kinds of
    # process, or once nested and once not, has an entry of each in pg_stat_statements).
    deltas: dict[tuple[str, bool], list[float]] = {}
    for key, after in run.end.statements.items():
        before = run.start.statements.get(key, Statement(0, 0.0, 0, 0, 0.0, after.query))
        if after.calls > before.calls:
            total = deltas.setdefault((statement_name(after.query), key[1]), [0, 0.0, 0, 0, 0.0])
            total[0] += after.calls - before.calls
            total[1] += after.exec_ms - before.exec_ms
            total[2] += after.rows - before.rows
            total[3] += after.plans - before.plans
            total[4] += after.plan_ms - before.plan_ms
    statements: list[dict[str, Any]] = [
        {
            "name": name,
            "toplevel": toplevel,
            "calls_per_job": round(calls / jobs, 4),
            "exec_us_per_job": round(exec_ms * 1e3 / jobs, 2),
            "rows_per_call": round(rows / calls, 2),
            "exec_us_per_call": round(exec_ms * 1e3 / calls, 1),
            # With track_planning only: plans per call, and planning time per job.
            "plans_per_call": round(plans / calls, 3),
            "plan_us_per_job": round(plan_ms * 1e3 / jobs, 2),
        }
        for (name, toplevel), (calls, exec_ms, rows, plans, plan_ms) in deltas.items()
    ]
    statements.sort(key=lambda s: -s["exec_us_per_job"])
    toplevel = [s for s in statements if s["toplevel"]]
    lateness = latency_stats(run.lateness) if run.lateness else {}
    return {
        "fleet": run.size.label,
        "processes": run.size.processes,
        "concurrency": run.size.concurrency,
        "slots": run.size.slots,
        "dispatch": run.dispatch,
        "offered_per_s": run.rate,
        "capacity_per_s": round(run.capacity),
        "stream_jobs": run.jobs,
        "window_jobs": jobs,
        "window_s": round(seconds, 2),
        "postgres_cpu_us_per_job": round(per_job["postgres"], 1),
        "statements_per_job": round(sum(s["calls_per_job"] for s in toplevel), 3),
        "statement_exec_us_per_job": round(sum(s["exec_us_per_job"] for s in toplevel), 1),
        "commits_per_job": round((run.end.commits - run.start.commits) / jobs, 3),
        "rows_fetched_per_job": round((run.end.fetched - run.start.fetched) / jobs, 2),
        "other_cpu_us_per_job": round(sum(per_job[k] for k in OTHER), 1),
        "cpu_us_per_job": {k: round(v, 1) for k, v in per_job.items()},
        "lateness": lateness,
        "lateness_samples": len(run.lateness),
        "lost": run.lost,
        "run_twice": run.twice,
        "enqueue_behind_ms": round(run.behind_s * 1e3, 1),
        # Cores busy over the window: the whole machine, and what this figure's processes used.
        "machine_busy_cores": round(busy / seconds, 2),
        "figure_cores": round(sum(spent.values()) / seconds, 2),
        "statements": statements[:top],
    }


def measure(inputs: Inputs, log: Any = print) -> dict[str, Any]:
    work = temporary_work_dir()
    sizes = inputs.sizes
    rows = []
    began = time.monotonic()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    try:
        with stack(inputs.track_planning) as servers:
            with psycopg.connect(servers.pg.admin_dsn, autocommit=True) as conn:
                preload = str(scalar(conn, "fleet_preload"))
            machine = describe(servers.pg.admin_dsn, servers.redis_url)
            for size in inputs.sizes:
                for dispatch in MODES:
                    _flush(servers.redis_url)
                    run = run_once(servers, size, dispatch, inputs, work)
                    rows.append(summarise(run, inputs.top))
                    log(_line(rows[-1]))
    except services.ServiceMissing as exc:
        return {"skipped": str(exc)}
    return {
        "inputs": asdict(inputs) | {"sizes": [f"{s.processes}x{s.concurrency}" for s in sizes]},
        "tier": {"partitions": PARTITIONS, **_tier_defaults()},
        "statements_source": f"pg_stat_statements (shared_preload_libraries = {preload}"
        + (", track_planning = on)" if inputs.track_planning else ")"),
        "load_before": load_before,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "seconds": round(time.monotonic() - began, 1),
        "logs": str(work),
        "machine": machine,
        "rows": rows,
    }


def _tier_defaults() -> dict[str, Any]:
    config = Config()
    return {"stage_horizon_s": config.stage_horizon, "leader_ttl_s": config.leader_ttl}


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


def _line(row: dict[str, Any]) -> str:
    late = row["lateness"]
    return (
        f"fleet {row['fleet']} ({row['slots']} slots) {row['dispatch']} at "
        f"{row['offered_per_s']:,.0f}/s: PostgreSQL {row['postgres_cpu_us_per_job']:.0f} µs/job, "
        f"{row['statements_per_job']:.2f} statements/job, {row['commits_per_job']:.2f} "
        f"commits/job, lateness p50 {late.get('p50_ms', float('nan')):.1f} ms p99 "
        f"{late.get('p99_ms', float('nan')):.1f} ms, other CPU {row['other_cpu_us_per_job']:.0f} "
        f"µs/job, lost {row['lost']}, twice {row['run_twice']}, machine busy "
        f"{row['machine_busy_cores']:.2f} cores (this figure {row['figure_cores']:.2f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    from bench import report_fleet

    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="PROCESSESxCONCURRENCY, ...")
    parser.add_argument("--load", type=float, default=0.5, help="offered rate ÷ capacity")
    parser.add_argument(
        "--max-rate", type=float, default=Inputs.max_rate, help="jobs/s at most (default 600)"
    )
    parser.add_argument("--warm-up", type=float, default=8.0, help="seconds before the window")
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured")
    parser.add_argument(
        "--due",
        choices=("spread", "tick"),
        default="spread",
        help="spread: each job due at its own instant (default); tick: the jobs of one enqueue "
        f"call ({TICK * 1000:.0f} ms of the stream) due at one instant",
    )
    parser.add_argument(
        "--track-planning",
        action="store_true",
        help="pg_stat_statements times each statement's planning too (plans per call and "
        "planning µs per job in the breakdown), at some cost to hot statements",
    )
    parser.add_argument("--quick", action="store_true", help="one tiny fleet, a short window")
    parser.add_argument("--out", type=Path, help="where the report goes (default bench/)")
    args = parser.parse_args(argv)
    if args.quick:
        inputs = Inputs.quick_run((Size(1, 8),))
    else:
        sizes = tuple(Size.parse(s) for s in args.sizes.split(",") if s.strip())
        inputs = Inputs(
            sizes,
            load=args.load,
            max_rate=args.max_rate,
            warm_up_s=args.warm_up,
            window_s=args.window,
            due=args.due,
            track_planning=args.track_planning,
        )
    stamp = lambda line: print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)  # noqa: E731
    result = measure(inputs, stamp)
    if "skipped" in result:
        print(f"figure 11 not measured: {result['skipped']}", file=sys.stderr)
        return 0
    out = args.out if args.out else (None if args.quick else HERE)
    chart = report_fleet.draw(result, out) if out is not None else None
    text = report_fleet.markdown(result, chart)
    print(text)
    write_report(out, "fleet", text, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
