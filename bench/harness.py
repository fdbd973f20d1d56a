"""Runs the figures: every system in the same run, on a fresh database per measurement.

Each measurement starts from an empty PostgreSQL database (and a flushed Redis database), so no
run inherits another's bloat. Workers are separate processes that import and connect before the
clock starts (`ready` / `go`), so interpreter start-up is not counted as queue time.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from psycopg import sql

from bench import cpu, herd, poison
from bench.merge import FIGURE_KEYS
from bench.pgproxy import CountingProxy
from bench.stats import percentile, summary
from bench.systems import load
from bench.systems.base import RateLimit, System, Target, WorkerConfig
from bench.systems.sql import Q
from chronoq import App, JobSpec

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "chronoq_bench"
POLL = 0.02
LATENESS_LEAD = 3.0  # seconds between enqueueing the lateness jobs and the first due time
# The herd falls due on the first whole second at least this long after its enqueue began: time
# for the enqueue and the VACUUM ANALYZE after it, with the workers already waiting.
HERD_LEAD = 2.0
# Every figure, in the order a full run takes them; "latency" is pickup and lateness together.
FIGURES = tuple(FIGURE_KEYS)
# The steady stream is enqueued ahead, all of it before its first job falls due: this lead and a
# second per this many jobs (well under the slowest peer's bulk enqueue, SAQ's 9k jobs/s).
STREAM_ENQUEUE_RATE = 5_000.0
# A system reached the stream's rate if its workers started at least this share of it in the
# middle half of the stream (the ends hold the start-up and the last jobs' tail).
STREAM_REACHED = 0.9
# Figure 9's calls of each system come in this many blocks, the systems taking turns.
SINGLY_BLOCKS = 10

T = TypeVar("T")

# The poison figure runs the real `chronoq worker` command on an app written into the work dir:
# ordinary work on one queue, handlers that take their worker process down on another.
POISON_WORK_JOBS = 200_000
POISON_LAYOUT = WorkerConfig(processes=2, concurrency=100, batch=100)
POISON_MAX_ATTEMPTS = 3
POISON_TIMEOUT = 0.5  # seconds: the hang task's timeout
WORK_MAX_ATTEMPTS = 10  # a work job may run beside a poison one when it strikes, more than once
# Claims take the highest priority first, then the earliest due: at priority 1 a poison job is
# claimed as it falls due (and again as each retry does), not behind the backlog of work.
POISON_PRIORITY = 1
WORK_QUEUE, POISON_QUEUE = "work", "poison"
POISON_MODULE = "bench_poison_app"
POISON_APP = f'''"""The poison figure's app: trivial work, and handlers that end their process."""

import os
import threading

import chronoq

app = chronoq.App()
QUICK = chronoq.Backoff(base=0.2, cap=1)


@app.task(queue="{WORK_QUEUE}", max_attempts={WORK_MAX_ATTEMPTS}, backoff=QUICK)
def work(n: int) -> int:
    return n * 2


@app.task(queue="{POISON_QUEUE}", max_attempts={POISON_MAX_ATTEMPTS}, backoff=QUICK)
def exit_hard() -> None:
    os._exit(3)


@app.task(
    queue="{POISON_QUEUE}",
    max_attempts={POISON_MAX_ATTEMPTS},
    backoff=QUICK,
    timeout={POISON_TIMEOUT},
)
def hang() -> None:
    threading.Event().wait()
'''


class BenchError(Exception):
    """A measurement could not be taken; the message says which and why."""


class LeadOutrun(BenchError):
    """An enqueue took longer than the lead its jobs were scheduled with: they fell due
    before they were all stored, so the run measures the enqueue, not the system."""


# A run whose enqueue outran its lead is taken again on a fresh database with the lead
# doubled, up to this many tries: a slow machine lengthens the wait before the first job falls
# due, never what is measured after it.
LEAD_TRIES = 3


def with_lead(settings: Settings, what: str, lead: float, run: Callable[[float], T]) -> T:
    """`run(lead)`; on a `LeadOutrun`, again with twice the lead, up to LEAD_TRIES tries."""
    for _ in range(LEAD_TRIES - 1):
        try:
            return run(lead)
        except LeadOutrun as exc:
            settings.log(f"{what}: {exc}; run again with a lead of {2 * lead:g} s")
            lead *= 2
    return run(lead)


@dataclass(frozen=True)
class Settings:
    smoke: bool
    repeats: int
    systems: tuple[str, ...]
    admin_dsn: str
    redis_url: str
    work_dir: Path
    drain_jobs: int
    bulk_jobs: int
    pickup_samples: int
    lateness_jobs: int
    backlog_due: int
    backlog_sizes: tuple[int, int]
    efficiency_jobs: int
    herd_jobs: int
    herd_rate: float  # jobs per second; the burst is the system's default
    poison_work_jobs: int
    poison_exit_hard: int  # poison jobs whose handler ends its process with os._exit(3)
    poison_hang: int  # poison jobs whose sync handler blocks past its timeout
    # Figure 8 (bench/tiered.py): tiered dispatch against db dispatch.
    tier_drain_jobs: int = 20_000
    tier_processes: tuple[int, ...] = (1, 2, 4)
    tier_burst_jobs: int = 10_000  # due within one second
    tier_steady_rate: float = 2_000.0  # jobs/s, unless half the drain capacity is lower
    tier_steady_s: float = 10.0  # how long the steady stream falls due
    tier_idle_workers: tuple[int, ...] = (0, 8, 32, 64)  # 0: tiered's leader alone
    tier_idle_settle_s: float = 3.0  # after the last idle worker is ready, before the window
    tier_idle_window_s: float = 15.0  # three of a db worker's 5 s poll intervals
    tier_move_timers: int = 50_000
    tier_move_backlog: int = 1_000_000  # pending beyond the horizon in the last move case
    tier_leader_ttl: float = 5.0
    tier_failovers: int = 20
    # Figure 9: enqueue one by one; the first calls open connections and prepare statements.
    singly_calls: int = 2_000
    singly_warmup: int = 50
    # Figure 10: a steady stream at half the drain capacity, or at `steady_rate` when drain did
    # not run; `steady_max_rate` caps it (the smoke run's low rate).
    steady_s: float = 10.0
    steady_rate: float = 2_000.0
    steady_max_rate: float | None = None
    database: str = BENCH_DB
    figures: tuple[str, ...] = FIGURES
    log: Callable[[str], None] = print

    @classmethod
    def full(cls, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "smoke": False,
            "repeats": 3,
            "drain_jobs": 100_000,
            "bulk_jobs": 100_000,
            "pickup_samples": 200,
            "lateness_jobs": 10_000,
            "backlog_due": 50_000,
            "backlog_sizes": (1_000, 1_000_000),
            "efficiency_jobs": 20_000,
            "herd_jobs": 20_000,
            "herd_rate": 1_000.0,
            "poison_work_jobs": POISON_WORK_JOBS,
            "poison_exit_hard": 20,
            "poison_hang": 5,
        }
        return cls(**(values | overrides))

    @classmethod
    def tiny(cls, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "smoke": True,
            "repeats": 1,
            "drain_jobs": 300,
            "bulk_jobs": 300,
            "pickup_samples": 10,
            "lateness_jobs": 200,
            "backlog_due": 300,
            "backlog_sizes": (10, 1_000),
            "efficiency_jobs": 300,
            "herd_jobs": 600,
            "herd_rate": 200.0,
            "poison_work_jobs": 300,
            "poison_exit_hard": 2,
            "poison_hang": 1,
            "tier_drain_jobs": 300,
            "tier_processes": (1,),
            "tier_burst_jobs": 150,
            "tier_steady_rate": 150.0,
            "tier_steady_s": 1.0,
            "tier_idle_workers": (2,),
            "tier_idle_settle_s": 0.3,
            "tier_idle_window_s": 1.0,
            "tier_move_timers": 2_000,
            "tier_move_backlog": 5_000,
            "tier_leader_ttl": 2.0,
            "tier_failovers": 2,
            "singly_calls": 50,
            "singly_warmup": 5,
            "steady_s": 1.0,
            "steady_rate": 150.0,
            "steady_max_rate": 150.0,
        }
        return cls(**(values | overrides))

    def target(self) -> Target:
        return Target(
            pg_dsn=with_database(self.admin_dsn, self.database),
            redis_url=self.redis_url,
            sqlite_path=str(self.work_dir / "bench.db"),
        )


# -- statistics ---------------------------------------------------------------------------


def latency_stats(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(percentile(ordered, 0.50) * 1000, 3),
        "p99_ms": round(percentile(ordered, 0.99) * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


# -- databases ----------------------------------------------------------------------------


def with_database(dsn: str, database: str, **query: str) -> str:
    parts = urlsplit(dsn)
    extra = "&".join(f"{k}={v}" for k, v in query.items())
    joined = "&".join(filter(None, [parts.query, extra]))
    return urlunsplit(parts._replace(path=f"/{database}", query=joined))


def recreate_database(admin_dsn: str, database: str) -> None:
    """`database` dropped, if it exists, and made again, empty."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name in ("drop_database", "create_database"):
            conn.execute(sql.SQL(Q[name]).format(db=sql.Identifier(database)))


def drop_database(admin_dsn: str, database: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(Q["drop_database"]).format(db=sql.Identifier(database)))


def fresh_environment(settings: Settings) -> Target:
    """An empty bench database, a flushed Redis database and no SQLite file."""
    recreate_database(settings.admin_dsn, settings.database)
    client = redis.Redis.from_url(settings.redis_url)
    client.flushdb()
    client.close()
    target = settings.target()
    for suffix in ("", "-wal", "-shm"):
        Path(target.sqlite_path + suffix).unlink(missing_ok=True)
    return target


def settle(target: Target) -> None:
    """VACUUM ANALYZE and a CHECKPOINT after loading, for every system alike, so that no
    autovacuum, stale statistics or checkpoint (with the full-page writes that follow it) lands
    in the middle of one system's measurement and not another's."""
    with psycopg.connect(target.pg_dsn, autocommit=True) as conn:
        conn.execute(Q["vacuum_analyze"])
        conn.execute(Q["checkpoint"])


def commits(target: Target) -> int:
    with psycopg.connect(target.pg_dsn, autocommit=True) as conn:
        row = conn.execute(Q["commits"]).fetchone()
    return int(row[0]) if row else 0


# -- worker processes ---------------------------------------------------------------------


@dataclass
class WorkerGroup:
    """`config.processes` worker processes of one system, started and ready, not yet going."""

    name: str
    target: Target
    config: WorkerConfig
    mode: str
    work_dir: Path
    limit: RateLimit | None = None  # in `herd` mode, the limit the workers declare
    lines: queue.Queue[float] = field(default_factory=queue.Queue)
    # When each reported start reached this process (epoch seconds): the steady stream's rate.
    arrivals: list[float] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, timeout: float = 60.0) -> None:
        ready: list[threading.Event] = []
        env = os.environ | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        args = [json.dumps(asdict(self.target)), json.dumps(self.config.to_dict()), self.mode]
        if self.limit is not None:
            args.append(json.dumps(self.limit.to_dict()))
        for index in range(self.config.processes):
            log_path = self.work_dir / f"{self.name}-{index}.log"
            self.logs.append(log_path)
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.worker", self.name, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_path.open("w"),
                text=True,
                cwd=ROOT,
                env=env,
            )
            self.procs.append(proc)
            event = threading.Event()
            ready.append(event)
            threading.Thread(target=self._read, args=(proc, event), daemon=True).start()
        deadline = time.monotonic() + timeout
        for event in ready:
            while not event.wait(0.1):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise BenchError(f"{self.name} workers not ready after {timeout:.0f}s")

    def _read(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.strip()
            if text == "ready":
                ready.set()
            elif text:
                self.arrivals.append(time.time())
                self.lines.put(float(text))

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()

    def check_alive(self) -> None:
        for proc, log_path in zip(self.procs, self.logs, strict=False):
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise BenchError(f"a {self.name} worker exited with {proc.returncode}:\n{tail}")

    def take(self, count: int, timeout: float) -> list[float]:
        """The next `count` latencies the workers report."""
        values: list[float] = []
        deadline = time.monotonic() + timeout
        while len(values) < count:
            try:
                values.append(self.lines.get(timeout=0.2))
            except queue.Empty:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise BenchError(
                        f"{self.name}: {len(values)} of {count} jobs started in {timeout:.0f}s"
                    ) from None
        return values

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def workers(
    settings: Settings,
    name: str,
    target: Target,
    config: WorkerConfig,
    mode: str,
    limit: RateLimit | None = None,
) -> Iterator[WorkerGroup]:
    group = WorkerGroup(name, target, config, mode, settings.work_dir, limit)
    try:
        group.start()
        yield group
    finally:
        group.stop()


def wait_drained(system: System, group: WorkerGroup, jobs: int, timeout: float) -> float:
    """Seconds from `go` until the system reports no job due or running."""
    group.go()
    started = time.perf_counter()
    while system.unfinished(cap=1):
        if time.perf_counter() - started > timeout:
            raise BenchError(f"{group.name}: not drained after {timeout:.0f}s ({jobs} jobs)")
        group.check_alive()
        time.sleep(POLL)
    return time.perf_counter() - started


def drain_timeout(jobs: int) -> float:
    return 120.0 + jobs / 100


# -- figures ------------------------------------------------------------------------------


def open_system(name: str, target: Target) -> System:
    system = load(name)(target)
    system.install()
    return system


@dataclass(frozen=True)
class Drain:
    rate: float  # jobs per second
    client_us: float  # worker processes' CPU per job, microseconds
    server_us: float  # database server's CPU per job, microseconds


def drain_once(settings: Settings, name: str, config: WorkerConfig, jobs: int) -> Drain:
    target = fresh_environment(settings)
    system = open_system(name, target)
    try:
        system.enqueue_noop(jobs)
        settle(target)
        with workers(settings, name, target, config, "drain") as group:
            pids = [proc.pid for proc in group.procs]
            client_before = cpu.processes_seconds(pids)
            server_before = cpu.server_seconds()
            seconds = wait_drained(system, group, jobs, drain_timeout(jobs))
            client = cpu.processes_seconds(pids) - client_before
            server = cpu.server_seconds_since(server_before)
        return Drain(jobs / seconds, client / jobs * 1e6, server / jobs * 1e6)
    finally:
        system.close()


def jobs_for(config: WorkerConfig, jobs: int) -> int:
    """Small fetches make a round trip per job or per ten: their rate is steady long before the
    full count, and draining it would take most of the suite's time budget."""
    if config.batch == 1:
        return max(1, jobs // 30)
    if config.batch < 100:
        return max(1, jobs // 5)
    return jobs


def figure_drain(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """Every system in every layout, `repeats` times. Each repeat is one pass over all of
    them, the systems of one layout (processes and batch) back to back, so that a slow spell
    of a shared machine falls on every system alike instead of on the repeats of whichever
    system ran then."""
    plan = [
        (name, config, drain_jobs_of(settings, name, config))
        for name in names
        for config in load(name).drain_configs(settings.smoke)
    ]
    order = sorted(range(len(plan)), key=lambda i: (plan[i][1].processes, plan[i][1].batch, i))
    runs: list[list[Drain]] = [[] for _ in plan]
    for repeat in range(settings.repeats):
        for i in order:
            name, config, jobs = plan[i]
            run = drain_once(settings, name, config, jobs)
            runs[i].append(run)
            settings.log(
                f"drain {name} {config.label}, run {repeat + 1}: {run.rate:,.0f} jobs/s, "
                f"CPU per job {run.client_us:.0f} µs client + {run.server_us:.0f} µs server"
            )
    return [
        {
            "system": name,
            "config": config.to_dict(),
            "label": config.label,
            "jobs": jobs,
            "jobs_per_s": summary([r.rate for r in each]),
            "client_cpu_us_per_job": summary([r.client_us for r in each]),
            "server_cpu_us_per_job": summary([r.server_us for r in each]),
        }
        for (name, config, jobs), each in zip(plan, runs, strict=True)
    ]


def drain_jobs_of(settings: Settings, name: str, config: WorkerConfig) -> int:
    """A system with a cap of its own (a slow peer) drains exactly that many."""
    cap = load(name).max_drain_jobs
    return min(settings.drain_jobs, cap) if cap else jobs_for(config, settings.drain_jobs)


def figure_bulk(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """Each repeat enqueues once with every system in turn (see figure_drain)."""
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(settings.repeats):
        for name in names:
            target = fresh_environment(settings)
            system = open_system(name, target)
            try:
                settle(target)  # no checkpoint left over from the previous run
                started = time.perf_counter()
                system.enqueue_noop(settings.bulk_jobs)
                seconds[name].append(time.perf_counter() - started)
            finally:
                system.close()
            rate = settings.bulk_jobs / seconds[name][-1]
            settings.log(f"bulk {name}, run {repeat + 1}: {rate:,.0f} jobs/s")
    return [
        {"system": name, "jobs": settings.bulk_jobs, "seconds": summary(taken)}
        | {"jobs_per_s": summary([settings.bulk_jobs / s for s in taken])}
        for name, taken in seconds.items()
    ]


def figure_pickup(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """One job at a time on an idle system: enqueue call to handler start."""

    def measure(system: System, group: WorkerGroup, lead: float) -> list[float]:
        time.sleep(1.0)  # let the workers reach their idle wait
        samples = []
        for _ in range(settings.pickup_samples):
            system.enqueue_due([time.time()])
            samples.extend(group.take(1, timeout=30))
            time.sleep(random.uniform(0.01, 0.03))
        return samples

    return _latency_figure(settings, names, "pickup", settings.pickup_samples, measure)


def figure_lateness(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """`lateness_jobs` jobs scheduled evenly across one second: due time to handler start."""
    count = settings.lateness_jobs

    def measure(system: System, group: WorkerGroup, lead: float) -> list[float]:
        first_due = time.time() + lead
        system.enqueue_due([first_due + i / count for i in range(count)])
        if time.time() > first_due:
            raise LeadOutrun(f"enqueue of {count} jobs took longer than {lead:g} s")
        return group.take(count, timeout=drain_timeout(count))

    return _latency_figure(settings, names, "lateness", count, measure)


def _latency_figure(
    settings: Settings,
    names: Sequence[str],
    figure: str,
    samples: int,
    measure: Callable[[System, WorkerGroup, float], list[float]],
) -> list[dict[str, Any]]:
    """Each system's latency workers, started and going, `measure`d on a fresh database (with
    a lead of LATENESS_LEAD, where the figure schedules its jobs ahead)."""
    rows = []
    for name in names:
        config = load(name).latency_config()
        run = partial(_latency_run, settings, name, config, measure)
        per_run = [
            latency_stats(with_lead(settings, f"{figure} {name}", LATENESS_LEAD, run))
            for _ in range(settings.repeats)
        ]
        rows.append(_latency_row(name, samples, per_run))
        settings.log(f"{figure} {name}: p99 {rows[-1]['p99_ms']['median']:.1f} ms")
    return rows


def _latency_run(
    settings: Settings,
    name: str,
    config: WorkerConfig,
    measure: Callable[[System, WorkerGroup, float], list[float]],
    lead: float,
) -> list[float]:
    target = fresh_environment(settings)
    system = open_system(name, target)
    try:
        with workers(settings, name, target, config, "record") as group:
            group.go()
            return measure(system, group, lead)
    finally:
        system.close()


def _latency_row(name: str, samples: int, per_run: list[dict[str, float]]) -> dict[str, Any]:
    row: dict[str, Any] = {"system": name, "samples": samples}
    for key in ("p50_ms", "p99_ms", "max_ms"):
        row[key] = summary([run[key] for run in per_run])
    return row


def figure_backlog(settings: Settings, name: str, config: WorkerConfig) -> list[dict[str, Any]]:
    """Drain rate of `backlog_due` due jobs with a small and a huge not-yet-due backlog."""
    rows = []
    for future in settings.backlog_sizes:
        target = fresh_environment(settings)
        system = open_system(name, target)
        rates = []
        try:
            system.enqueue_future(future)
            for _ in range(settings.repeats):
                system.enqueue_noop(settings.backlog_due)
                settle(target)
                with workers(settings, name, target, config, "drain") as group:
                    seconds = wait_drained(
                        system, group, settings.backlog_due, drain_timeout(settings.backlog_due)
                    )
                rates.append(settings.backlog_due / seconds)
        finally:
            system.close()
        rows.append(
            {"system": name, "config": config.to_dict(), "future_jobs": future}
            | {"due_jobs": settings.backlog_due, "jobs_per_s": summary(rates)}
        )
        settings.log(f"backlog {name} {future:,} future: {statistics.median(rates):,.0f} jobs/s")
    return rows


def figure_efficiency(settings: Settings, configs: dict[str, WorkerConfig]) -> list[dict[str, Any]]:
    """Round trips (counted on the wire) and commits (pg_stat_database) per job at saturation,
    each PostgreSQL system in its best drain layout."""
    rows = []
    upstream = urlsplit(settings.admin_dsn)
    with CountingProxy(upstream.hostname or "127.0.0.1", upstream.port or 5432) as proxy:
        for name, config in configs.items():
            jobs = settings.efficiency_jobs
            target = fresh_environment(settings)
            system = open_system(name, target)
            proxied = replace(
                target,
                pg_dsn=with_database(
                    settings.admin_dsn.replace(f":{upstream.port or 5432}", f":{proxy.port}", 1),
                    settings.database,
                    sslmode="disable",
                ),
            )
            try:
                system.enqueue_noop(jobs)
                settle(target)
                polls_cost = _commits_per_poll(system, target)
                with workers(settings, name, proxied, config, "drain") as group:
                    proxy.reset()
                    before = commits(target)
                    polls = 0
                    group.go()
                    while system.unfinished(cap=1):
                        polls += 1
                        group.check_alive()
                        time.sleep(0.1)
                    counted = proxy.counts.snapshot()
                time.sleep(1.5)  # backends flush their statistics at most once a second
                after = commits(target)
            finally:
                system.close()
            worker_commits = after - before - 1 - round((polls + 1) * polls_cost)
            rows.append(
                {
                    "system": name,
                    "config": config.to_dict(),
                    "jobs": jobs,
                    "round_trips_per_job": round(counted["round_trips"] / jobs, 4),
                    "commits_per_job": round(max(0, worker_commits) / jobs, 4),
                    "round_trips": counted["round_trips"],
                    "commits": worker_commits,
                }
            )
            settings.log(
                f"efficiency {name}: {rows[-1]['round_trips_per_job']} round trips/job, "
                f"{rows[-1]['commits_per_job']} commits/job"
            )
    return rows


def _commits_per_poll(system: System, target: Target) -> float:
    """What one `unfinished()` call itself commits, so the parent's polling is not counted."""
    before = commits(target)
    for _ in range(20):
        system.unfinished(cap=1)
    time.sleep(1.5)
    return max(0.0, (commits(target) - before - 1) / 20)


def figure_herd(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """`herd_jobs` no-op jobs due at one instant on a queue limited to `herd_rate`, drained by
    workers that were waiting for them; every figure comes from the database's `started_at`."""
    rows = []
    limit = RateLimit(settings.herd_rate)
    for name in names:
        cls = load(name)
        if cls.herd_layout is None:
            rows.append({"system": name, "skipped": cls.herd_skip})
            settings.log(f"herd {name}: not measured, {cls.herd_skip}")
            continue
        layout = cls.herd_layout
        run = partial(herd_once, settings, name, layout, limit)
        runs = [
            with_lead(settings, f"herd {name}", HERD_LEAD, run) for _ in range(settings.repeats)
        ]
        rows.append(_herd_row(name, layout, settings, runs))
        row = rows[-1]
        settings.log(
            f"herd {name}: span {row['span_s']['median']:.2f} s "
            f"(ideal {row['ideal_span_s']:.2f} s), busiest 1 s "
            f"{row['busiest_sliding_1s']['max']:.0f} (bound {row['window_bound_1s']:.0f})"
        )
    return rows


@dataclass(frozen=True)
class HerdResult:
    run: herd.HerdRun
    burst: float  # the bucket size the store held: the one the workers enforced
    lead_s: float


def herd_once(
    settings: Settings, name: str, config: WorkerConfig, limit: RateLimit, lead: float
) -> HerdResult:
    target = fresh_environment(settings)
    system = open_system(name, target)
    jobs = settings.herd_jobs
    try:
        settle(target)  # no checkpoint left over from the previous run
        with workers(settings, name, target, config, "herd", limit) as group:
            # They store the limit at once (a full bucket), find nothing due and wait; the
            # herd falls due at least `lead` later.
            group.go()
            due_us = system.enqueue_herd(jobs, lead)
            settle(target)  # fresh statistics for the claims; no autovacuum of the new rows
            if time.time() * 1e6 > due_us:
                raise LeadOutrun(f"{name}: enqueue of the herd took longer than {lead:g} s")
            timeout = drain_timeout(jobs) + jobs / settings.herd_rate
            _wait_herd_drained(system, group, jobs, timeout)
        starts = system.herd_starts()
        burst = system.herd_burst()
    finally:
        system.close()
    if len(starts) != jobs:
        raise BenchError(f"{name}: {len(starts)} of {jobs} herd jobs have a start time")
    return HerdResult(herd.measure_herd(starts), burst, lead)


def _wait_herd_drained(system: System, group: WorkerGroup, jobs: int, timeout: float) -> None:
    started = time.perf_counter()
    while system.herd_unfinished(cap=1):
        if time.perf_counter() - started > timeout:
            raise BenchError(f"{group.name}: herd not drained after {timeout:.0f}s ({jobs} jobs)")
        group.check_alive()
        time.sleep(POLL)


def _herd_row(
    name: str, config: WorkerConfig, settings: Settings, results: list[HerdResult]
) -> dict[str, Any]:
    bursts = {r.burst for r in results}
    if len(bursts) != 1:
        raise BenchError(f"{name}: the stored burst changed between runs: {sorted(bursts)}")
    burst, rate, jobs = bursts.pop(), settings.herd_rate, settings.herd_jobs
    ideal = herd.ideal_span_s(jobs, rate, burst)
    bound_1s = herd.window_bound(rate, burst, 1.0)
    runs = [r.run for r in results]
    spans = [r.span_s for r in runs]
    # The chart shows the run whose span is the median (the middle one of three).
    chart_run = sorted(range(len(runs)), key=lambda i: spans[i])[len(runs) // 2]
    return {
        "system": name,
        "config": config.to_dict(),
        "jobs": jobs,
        "rate": rate,
        "burst": burst,
        "lead_s": min(r.lead_s for r in results),
        "ideal_span_s": round(ideal, 6),
        "window_bound_1s": bound_1s,
        "window_bound_100ms": herd.window_bound(rate, burst, 0.1),
        "span_s": summary(spans),
        "span_ratio": summary([s / ideal for s in spans]),
        "busiest_aligned_1s": summary([r.busiest_aligned_1s for r in runs]),
        "busiest_sliding_1s": summary([r.busiest_sliding_1s for r in runs]),
        "busiest_ratio": summary([r.busiest_sliding_1s / bound_1s for r in runs]),
        "busiest_sliding_100ms": summary([r.busiest_sliding_100ms for r in runs]),
        "lateness_p50_s": summary([r.lateness_p50_s for r in runs]),
        "lateness_p99_s": summary([r.lateness_p99_s for r in runs]),
        "lateness_max_s": summary([r.lateness_max_s for r in runs]),
        "early": sum(r.early for r in runs),
        "jobs_per_worker": [r.per_worker for r in runs],
        "per_100ms": runs[chart_run].per_100ms,
        "chart_run": chart_run,
    }


def figure_poison(settings: Settings) -> list[dict[str, Any]]:
    """chronoq's work queue drained by `chronoq worker --processes 2`, without and then with
    poison jobs on another queue that crash or retire the worker processes; every figure comes
    from the database and the supervisor's log."""
    baselines: list[PoisonResult] = []
    poisoned: list[PoisonResult] = []
    lead = poison_lead(settings.poison_work_jobs)
    for _ in range(settings.repeats):
        baselines.append(with_lead(settings, "poison", lead, partial(poison_once, settings, None)))
        # The poison jobs fall due across the time the same work took without them.
        window = baselines[-1].seconds
        poisoned.append(with_lead(settings, "poison", lead, partial(poison_once, settings, window)))
    row = _poison_row(settings, baselines, poisoned)
    settings.log(
        f"poison chronoq: {row['baseline_jobs_per_s']['median']:,.0f} jobs/s without poison, "
        f"{row['poisoned_jobs_per_s']['median']:,.0f} with ({row['ratio']['median']:.2f}×); "
        f"{row['crashed']['median']:.0f} crashes + {row['retired']['median']:.0f} retirements, "
        f"every poison job dead at {POISON_MAX_ATTEMPTS} attempts, no work job lost"
    )
    return [row]


@dataclass(frozen=True)
class PoisonResult:
    """One drain of the work queue, with or without poison jobs beside it."""

    seconds: float  # the work queue's first start to its last finish, by the database's clock
    jobs_per_s: float
    window_s: float  # the poison jobs fell due across this many seconds (0: none enqueued)
    log: poison.SupervisorLog
    crashed_workers: int  # distinct worker ids in WorkerCrashed records
    work_retried: int
    work_extra_attempts: int
    work_max_attempts: int
    work_not_done: int
    work_errors: dict[str, int]
    poison_dead_at_max: int
    poison_errors: dict[str, dict[str, int]]
    down_share: float  # process time the empty slots cost inside the work drain
    supervisor_running: bool  # once every job had ended
    exit_code: int  # the supervisor's, after SIGTERM


@dataclass
class PoisonSupervisor:
    """`python -m chronoq worker` with `POISON_LAYOUT` on the poison app, its log in a file."""

    dsn: str
    work_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        app_dir = self.work_dir / "poison-app"
        app_dir.mkdir(exist_ok=True)
        (app_dir / f"{POISON_MODULE}.py").write_text(POISON_APP, encoding="utf-8")
        config = POISON_LAYOUT
        command = [sys.executable, "-m", "chronoq", "worker", "--app", f"{POISON_MODULE}:app"]
        options = {
            "--dsn": self.dsn,
            "--processes": config.processes,
            "--concurrency": config.concurrency,
            "--batch": config.batch,
        }
        command += [str(part) for pair in options.items() for part in pair]
        with self.log_path.open("wb") as sink:
            self.proc = subprocess.Popen(
                command,
                cwd=app_dir,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=os.environ | {"PYTHONUNBUFFERED": "1"},
            )

    def text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise BenchError(
                f"the poison figure's supervisor exited with {self.proc.returncode} while its "
                f"jobs ran ({self.log_path}):\n{self.text()[-2000:]}"
            )

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Until every worker process has logged that it serves its queues."""
        deadline = time.monotonic() + timeout
        while self.text().count(" serving ") < POISON_LAYOUT.processes:
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"poison workers not serving after {timeout:.0f}s")
            time.sleep(POLL)

    def stop(self) -> int:
        """SIGTERM, as a deployment stops it; its exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # its children stop by themselves once it is gone
            self.proc.wait()
            raise BenchError(
                f"the poison figure's supervisor ignored SIGTERM ({self.log_path})"
            ) from None


def poison_once(settings: Settings, window_s: float | None, lead: float) -> PoisonResult:
    """The work jobs, and with a `window_s` the poison jobs, on a fresh database: all due at one
    instant after the workers serve (the poison jobs across `window_s` seconds from it)."""
    target = fresh_environment(settings)
    jobs = settings.poison_work_jobs
    plan = (
        []
        if window_s is None
        else poison.schedule(settings.poison_exit_hard, settings.poison_hang, window_s)
    )
    runs = len(list(settings.work_dir.glob("poison-*.log")))
    label = "poisoned" if plan else "baseline"
    supervisor = PoisonSupervisor(
        target.pg_dsn, settings.work_dir, settings.work_dir / f"poison-{runs}-{label}.log"
    )
    app = App(target.pg_dsn, pool_size=1)
    watch = None
    try:
        app.migrate()
        supervisor.start()
        supervisor.wait_serving()
        watch = psycopg.connect(target.pg_dsn, autocommit=True)
        row = watch.execute(Q["chronoq_herd_due_at"], {"lead": lead}).fetchone()
        due = row[0] if row else None
        if not isinstance(due, datetime):
            raise BenchError(f"the database clock read {due!r}, not a timestamp")
        work = (JobSpec("work", {"n": n}, queue=WORK_QUEUE, run_at=due) for n in range(jobs))
        poisons = [
            JobSpec(
                task,
                queue=POISON_QUEUE,
                priority=POISON_PRIORITY,
                run_at=due + timedelta(seconds=s),
            )
            for s, task in plan
        ]
        app.enqueue_many(itertools.chain(work, poisons))
        settle(target)
        if datetime.now(UTC) > due:
            raise LeadOutrun(f"poison: enqueue of {jobs:,} jobs took longer than {lead:g} s")
        _wait_poison_drained(watch, supervisor, jobs + len(plan), timeout=drain_timeout(jobs))
        work_row = watch.execute(Q["poison_work"], {"queue": WORK_QUEUE}).fetchone()
        work_errors: dict[str, int] = {
            str(kind): int(n)
            for kind, n in watch.execute(Q["poison_work_errors"], {"queue": WORK_QUEUE})
        }
        poison_jobs = [
            poison.PoisonJob(*found)
            for found in watch.execute(Q["poison_jobs"], {"queue": POISON_QUEUE})
        ]
        crashed_row = watch.execute(Q["poison_crashed_workers"]).fetchone()
        running = supervisor.proc is not None and supervisor.proc.poll() is None
        exit_code = supervisor.stop()
    finally:
        if watch is not None:
            watch.close()
        if supervisor.proc is not None and supervisor.proc.poll() is None:
            supervisor.proc.kill()
            supervisor.proc.wait()
        app.close()
    return _poison_result(
        settings,
        supervisor,
        PoisonRead(
            jobs,
            window_s or 0.0,
            work_row,
            work_errors,
            poison_jobs,
            int(crashed_row[0]) if crashed_row else 0,
            running,
            exit_code,
        ),
    )


@dataclass(frozen=True)
class PoisonRead:
    """What one poison run left behind, as read before the checks."""

    jobs: int
    window_s: float
    work_row: tuple[Any, ...] | None
    work_errors: dict[str, int]
    poison_jobs: list[poison.PoisonJob]
    crashed_workers: int
    supervisor_running: bool
    exit_code: int


def poison_lead(jobs: int) -> float:
    """Seconds from reading the database's clock to the instant the jobs fall due: the bulk
    enqueue and the VACUUM ANALYZE after it, at well under 40k jobs a second, plus 2 s."""
    return 2.0 + jobs / 40_000


def _wait_poison_drained(
    watch: psycopg.Connection[tuple[Any, ...]],
    supervisor: PoisonSupervisor,
    jobs: int,
    timeout: float,
) -> None:
    started = time.perf_counter()
    args = {"cap": 1, "work": WORK_QUEUE, "poison": POISON_QUEUE}
    while True:
        row = watch.execute(Q["poison_unfinished"], args).fetchone()
        if not row or not row[0]:
            return
        supervisor.check_alive()
        if time.perf_counter() - started > timeout:
            raise BenchError(f"poison: not drained after {timeout:.0f}s ({jobs:,} jobs)")
        time.sleep(POLL)


def _poison_result(
    settings: Settings, supervisor: PoisonSupervisor, read: PoisonRead
) -> PoisonResult:
    """The run's figures, once every condition the figure stands on has been checked: each
    one failing is a bug in what is measured, and fails the figure."""
    where = f"(log: {supervisor.log_path})"
    if read.work_row is None or read.work_row[5] is None:
        raise BenchError(f"poison: no work job started {where}")
    count, done, retried, extra, max_attempts, first_start, last_finish = read.work_row
    if count != read.jobs or done != read.jobs:
        raise BenchError(
            f"poison: {done:,} of {read.jobs:,} work jobs done ({count:,} stored) {where}"
        )
    expected = settings.poison_exit_hard + settings.poison_hang if read.window_s else 0
    problems = poison.poison_problems(read.poison_jobs, POISON_MAX_ATTEMPTS, expected)
    if problems:
        raise BenchError("poison: " + "; ".join(problems) + f" {where}")
    log = poison.parse_log(supervisor.text())
    if not read.supervisor_running or log.gave_up:
        raise BenchError(f"poison: the supervisor gave up on its worker processes {where}")
    if read.exit_code != 0:
        raise BenchError(
            f"poison: the supervisor exited with {read.exit_code} after SIGTERM {where}"
        )
    if not read.window_s and log.deaths:
        raise BenchError(f"poison: {len(log.deaths)} worker death(s) without poison {where}")
    start, end = float(first_start), float(last_finish)
    seconds = end - start
    return PoisonResult(
        seconds=seconds,
        jobs_per_s=read.jobs / seconds,
        window_s=read.window_s,
        log=log,
        crashed_workers=read.crashed_workers,
        work_retried=int(retried),
        work_extra_attempts=int(extra),
        work_max_attempts=int(max_attempts),
        work_not_done=read.jobs - int(done),
        work_errors=read.work_errors,
        poison_dead_at_max=poison.dead_at(read.poison_jobs, POISON_MAX_ATTEMPTS),
        poison_errors=poison.error_kinds(read.poison_jobs),
        down_share=log.down_within(start, end) / (POISON_LAYOUT.processes * seconds),
        supervisor_running=read.supervisor_running,
        exit_code=read.exit_code,
    )


def _poison_row(
    settings: Settings, baselines: list[PoisonResult], poisoned: list[PoisonResult]
) -> dict[str, Any]:
    def added(counts: Sequence[dict[str, int]]) -> dict[str, int]:
        total: Counter[str] = Counter()
        for each in counts:
            total.update(each)
        return dict(sorted(total.items()))

    down = [statistics.median(r.log.down_s()) if r.log.down_s() else 0.0 for r in poisoned]
    tasks = sorted({task for r in poisoned for task in r.poison_errors})
    return {
        "system": "chronoq",
        "config": POISON_LAYOUT.to_dict(),
        "work_jobs": settings.poison_work_jobs,
        "exit_hard": settings.poison_exit_hard,
        "hang": settings.poison_hang,
        "max_attempts": POISON_MAX_ATTEMPTS,
        "timeout_s": POISON_TIMEOUT,
        "baseline_s": summary([r.seconds for r in baselines]),
        "baseline_jobs_per_s": summary([r.jobs_per_s for r in baselines]),
        "poisoned_s": summary([r.seconds for r in poisoned]),
        "poisoned_jobs_per_s": summary([r.jobs_per_s for r in poisoned]),
        "ratio": summary(
            [p.jobs_per_s / b.jobs_per_s for b, p in zip(baselines, poisoned, strict=True)]
        ),
        "window_s": summary([r.window_s for r in poisoned]),
        "deaths": summary([len(r.log.deaths) for r in poisoned]),
        "crashed": summary([r.log.crashed for r in poisoned]),
        "retired": summary([r.log.retired for r in poisoned]),
        "crashed_workers": summary([r.crashed_workers for r in poisoned]),
        "down_s_per_death": summary(down),
        "down_share": summary([r.down_share for r in poisoned]),
        # Totals over the runs with poison; every run was checked before it counted here.
        "poison_jobs": (settings.poison_exit_hard + settings.poison_hang) * len(poisoned),
        "poison_dead_at_max_attempts": sum(r.poison_dead_at_max for r in poisoned),
        "poison_errors": {
            task: added([r.poison_errors.get(task, {}) for r in poisoned]) for task in tasks
        },
        "work_retried": summary([r.work_retried for r in poisoned]),
        "work_extra_attempts": summary([r.work_extra_attempts for r in poisoned]),
        "work_max_attempts": max(r.work_max_attempts for r in poisoned),
        "work_not_done": sum(r.work_not_done for r in baselines + poisoned),
        "work_errors": added([r.work_errors for r in poisoned]),
        "supervisor_running": all(r.supervisor_running for r in baselines + poisoned),
        "supervisor_exit_codes": [r.exit_code for r in baselines + poisoned],
    }


# -- figure 9: enqueue one by one ----------------------------------------------------------


@dataclass
class Singly:
    """One system's single-job enqueue calls in one repeat, block by block."""

    seconds: list[float] = field(default_factory=list)  # each call's, from call to return
    wall_s: float = 0.0  # the blocks' calls, back to back
    cpu_s: float = 0.0  # this process's CPU meanwhile: the client's, and an embedded database's

    def add(self, system: System, calls: int) -> None:
        cpu_before, started = time.process_time(), time.perf_counter()
        self.seconds += system.enqueue_singly(calls)
        self.wall_s += time.perf_counter() - started
        self.cpu_s += time.process_time() - cpu_before


def figure_enqueue(settings: Settings, names: Sequence[str]) -> list[dict[str, Any]]:
    """`singly_calls` jobs enqueued one call at a time by each system's single-job API."""
    runs: dict[str, list[Singly]] = {name: [] for name in names}
    for repeat in range(settings.repeats):
        for name, run in singly_repeat(settings, names, repeat).items():
            runs[name].append(run)
    limit = runs.get("bare-sql")
    rows = [_singly_row(name, settings.singly_calls, runs[name], limit) for name in names]
    for row in rows:
        settings.log(
            f"enqueue {row['system']}: median {row['p50_us']['median']:,.0f} µs, "
            f"p99 {row['p99_us']['median']:,.0f} µs, {row['calls_per_s']['median']:,.0f} calls/s"
        )
    return rows


def singly_repeat(settings: Settings, names: Sequence[str], repeat: int) -> dict[str, Singly]:
    """Every system open at once on one fresh database (their tables do not meet, bar chronoq
    and the plain INSERT sharing chronoq's), taking turns a block of calls at a time, the order
    turning from block to block: a busy moment of the shared machine lands on all of them
    alike, not on one system's whole run."""
    target = fresh_environment(settings)
    systems: dict[str, System] = {}
    try:
        for name in names:
            systems[name] = open_system(name, target)
        settle(target)
        for system in systems.values():
            system.enqueue_singly(settings.singly_warmup)  # connects, prepares: not counted
        runs = {name: Singly() for name in names}
        for index, calls in enumerate(block_sizes(settings.singly_calls, SINGLY_BLOCKS)):
            for name in rotated(names, repeat + index):
                runs[name].add(systems[name], calls)
        return runs
    finally:
        for system in systems.values():
            system.close()


def block_sizes(total: int, blocks: int) -> list[int]:
    """`total` split into at most `blocks` sizes that differ by one at most, none empty."""
    sizes = [total // blocks + (1 if i < total % blocks else 0) for i in range(blocks)]
    return [size for size in sizes if size]


def rotated(names: Sequence[str], shift: int) -> list[str]:
    """`names` starting at index `shift` (modulo their count), then wrapping around."""
    start = shift % len(names) if names else 0
    return [*names[start:], *names[:start]]


def _singly_row(
    name: str, calls: int, runs: list[Singly], limit: list[Singly] | None
) -> dict[str, Any]:
    """Per-call latency in µs, calls/s and CPU per call; and the median latency against the
    plain INSERT's in the same repeat (the runs were interleaved, so each pair ran together)."""
    stats = [call_stats(run.seconds) for run in runs]
    row: dict[str, Any] = {"system": name, "calls": calls}
    row |= {key: summary([s[key] for s in stats]) for key in ("p50_us", "p99_us", "max_us")}
    row["calls_per_s"] = summary([calls / run.wall_s for run in runs])
    row["cpu_us_per_call"] = summary([run.cpu_s / calls * 1e6 for run in runs])
    if limit:
        ratios = [
            ours["p50_us"] / call_stats(bare.seconds)["p50_us"]
            for ours, bare in zip(stats, limit, strict=True)
        ]
        row["vs_insert"] = summary(ratios)
    return row


def call_stats(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50_us": round(percentile(ordered, 0.50) * 1e6, 1),
        "p99_us": round(percentile(ordered, 0.99) * 1e6, 1),
        "max_us": round(ordered[-1] * 1e6, 1),
    }


# -- figure 10: lateness of a steady stream ------------------------------------------------


@dataclass(frozen=True)
class StreamRate:
    rate: float  # jobs per second
    why: str


def stream_rate(
    drain_rows: Sequence[dict[str, Any]], name: str, fallback: float, cap: float | None
) -> StreamRate:
    """Half the system's best drain rate in this run; `fallback` when drain did not run for it;
    no more than `cap` (the smoke run's low rate)."""
    best = max(
        (float(r["jobs_per_s"]["median"]) for r in drain_rows if r["system"] == name),
        default=None,
    )
    if best is None:
        chosen = StreamRate(fallback, "drain not measured in this run")
    else:
        chosen = StreamRate(round(best / 2), f"half the best drain rate, {best:,.0f}")
    if cap is not None and chosen.rate > cap:
        return StreamRate(cap, f"the smoke run's cap; {chosen.why}")
    return chosen


def middle_rate(arrivals: Sequence[float], first_due: float, spread_s: float) -> float:
    """Starts per second in the middle half of a stream due across `spread_s` from
    `first_due`: a system that keeps up starts the stream's rate there, one that cannot starts
    its own capacity (the first quarter holds its start-up, the last its tail)."""
    low, high = first_due + spread_s / 4, first_due + spread_s * 3 / 4
    return sum(1 for t in arrivals if low <= t < high) / (high - low)


@dataclass(frozen=True)
class StreamRun:
    lateness: list[float]  # seconds, each job's start minus its due time
    started_per_s: float  # in the middle half of the stream


def figure_steady(
    settings: Settings, names: Sequence[str], drain_rows: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A stream of no-op jobs due evenly at half each system's drain capacity for `steady_s`
    seconds, enqueued ahead: due time to handler start. Each system runs in its best drain
    layout when drain ran (the capacity the rate is half of), else in its latency layout."""
    layouts = best_configs(list(drain_rows))
    rows = []
    for name in names:
        rate = stream_rate(drain_rows, name, settings.steady_rate, settings.steady_max_rate)
        config = layouts.get(name) or load(name).latency_config()
        run = partial(stream_once, settings, name, config, rate.rate)
        runs = [
            with_lead(settings, f"steady {name}", LATENESS_LEAD, run)
            for _ in range(settings.repeats)
        ]
        rows.append(_stream_row(name, config, rate, settings.steady_s, runs))
        row = rows[-1]
        settings.log(
            f"steady {name} at {rate.rate:,.0f}/s: p50 {row['p50_ms']['median']:.1f} ms, "
            f"p99 {row['p99_ms']['median']:.1f} ms, max {row['max_ms']['median']:.1f} ms, "
            f"started {row['started_per_s']['median']:,.0f}/s in the middle half"
        )
    return rows


def stream_once(
    settings: Settings, name: str, config: WorkerConfig, rate: float, lead: float
) -> StreamRun:
    jobs = max(1, round(rate * settings.steady_s))
    target = fresh_environment(settings)
    system = open_system(name, target)
    try:
        with workers(settings, name, target, config, "stream") as group:
            group.go()
            first_due = time.time() + lead + jobs / STREAM_ENQUEUE_RATE
            system.enqueue_due([first_due + i / rate for i in range(jobs)])
            if time.time() > first_due:
                raise LeadOutrun(f"{name}: enqueue of the {jobs:,}-job stream outran its lead")
            lateness = group.take(jobs, timeout=drain_timeout(jobs) + settings.steady_s)
            started = middle_rate(group.arrivals, first_due, settings.steady_s)
    finally:
        system.close()
    return StreamRun(lateness, started)


def _stream_row(
    name: str, config: WorkerConfig, rate: StreamRate, spread_s: float, runs: list[StreamRun]
) -> dict[str, Any]:
    jobs = len(runs[0].lateness)
    row = _latency_row(name, jobs, [latency_stats(run.lateness) for run in runs])
    started = summary([run.started_per_s for run in runs])
    return row | {
        "config": config.to_dict(),
        "rate": rate.rate,
        "rate_why": rate.why,
        "spread_s": spread_s,
        "started_per_s": started,
        "reached": started["median"] >= STREAM_REACHED * rate.rate,
        "reached_share": STREAM_REACHED,
    }


def best_configs(drain_rows: list[dict[str, Any]]) -> dict[str, WorkerConfig]:
    best: dict[str, dict[str, Any]] = {}
    for row in drain_rows:
        current = best.get(row["system"])
        if current is None or row["jobs_per_s"]["median"] > current["jobs_per_s"]["median"]:
            best[row["system"]] = row
    return {name: WorkerConfig(**row["config"]) for name, row in best.items()}


def check_figures(figures: Sequence[str]) -> None:
    """Refuse a selection the harness cannot run: unknown names, or a figure measured in the
    best drain layout without the drain figure that finds it."""
    unknown = [name for name in figures if name not in FIGURES]
    if unknown:
        raise BenchError(f"unknown figure(s): {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    needs_drain = [name for name in ("backlog", "efficiency") if name in figures]
    if needs_drain and "drain" not in figures:
        raise BenchError(f"{' and '.join(needs_drain)} run in the best drain layout: add drain")


def run(settings: Settings) -> dict[str, Any]:
    check_figures(settings.figures)
    started = time.time()
    classes = {name: load(name) for name in settings.systems}
    postgres = [n for n, c in classes.items() if c.backend == "postgres"]
    latency = [n for n, c in classes.items() if c.measures_latency]
    selected = set(settings.figures)
    figures: dict[str, Any] = {}
    if "drain" in selected:
        figures["drain"] = figure_drain(settings, list(classes))
    if "bulk" in selected:
        figures["bulk"] = figure_bulk(settings, list(classes))
    if "latency" in selected:
        figures["pickup"] = figure_pickup(settings, latency)
        figures["lateness"] = figure_lateness(settings, latency)
    best = best_configs(figures.get("drain", []))
    if "backlog" in selected and "chronoq" in classes:
        figures["backlog"] = figure_backlog(settings, "chronoq", best["chronoq"])
    if "efficiency" in selected:
        figures["efficiency"] = figure_efficiency(settings, {name: best[name] for name in postgres})
    if "herd" in selected:
        figures["herd"] = figure_herd(settings, list(classes))
    if "poison" in selected and "chronoq" in classes:
        figures["poison"] = figure_poison(settings)
    if "tiered" in selected and "chronoq" in classes:
        # Imported here: bench.tiered builds on this module's settings and helpers.
        from bench.tiered import figure_tiered

        figures["tiered"] = figure_tiered(settings)
    if "enqueue" in selected:
        figures["enqueue"] = figure_enqueue(settings, list(classes))
    if "steady" in selected:
        figures["steady"] = figure_steady(settings, latency, figures.get("drain", []))
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started, 1),
        "smoke": settings.smoke,
        "repeats": settings.repeats,
        "figures_run": [name for name in FIGURES if name in selected],
        "systems": {
            name: {
                "title": cls.title,
                "version": cls.version(),
                "backend": cls.backend,
                "notes": cls.notes,
            }
            for name, cls in classes.items()
        },
        "figures": figures,
    }


def temporary_work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="chronoq-bench-"))
