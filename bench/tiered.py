"""Figure 8: tiered dispatch against db dispatch, both chronoq, in one run.

Five probes, all on private servers started for the figure (`bench.services`): a PostgreSQL
cluster, a redis-server and one etcd member, so the database's statements and CPU are this
figure's alone and dozens of idle workers cannot exhaust a shared server's connections.

```
 drain      pending no-op jobs, N worker processes (c100 b100) started, jobs/s until none is
            left; tiered adds its one partition leader process (static elector, 4 partitions)
 lateness   started_at - run_at of `burst` jobs due within one second, and of a steady stream
            (2,000 jobs/s, or half the lower measured drain rate when that is lower)
 idle       N idle worker processes: statements/s (pg_stat_statements, this database only) and
            CPU of every PostgreSQL process, over a window; tiered includes its leader
 move       timers/s one partition leader moves at a Lua batch of 1, 100, 1,000, all due at one
            instant and staged beforehand; and at 1,000 with a backlog beyond the horizon
 failover   two leader processes elected in etcd, one partition: SIGKILL the leader, a probe
            timer due 0.1 s later, seconds from the kill to the probe's start
```

Start instants are read from the database afterwards (the clock that stamps run_at), never
reported by the workers.
"""

from __future__ import annotations

import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench import cpu, services, timing_wheel
from bench.harness import ROOT, BenchError, Settings, latency_stats, recreate_database
from bench.stats import summary
from bench.systems.sql import Q
from bench.tier_proc import Spec, build_app, build_leader
from chronoq import JobSpec
from chronoq.observability.events import Observers, Subscription, TimersMoved, TimersStaged

DATABASE = "chronoq_tier"
MODES = ("db", "tiered")
LATENESS_PROCESSES = 2
LEADER_GRACE = 0.1  # the failover probe falls due this long after the kill
POLL = 0.02


@dataclass(frozen=True)
class Stack:
    pg: services.Postgres
    redis_url: str
    redis_pid: int
    etcd: str

    @property
    def dsn(self) -> str:
        return self.pg.admin_dsn.rsplit("/", 1)[0] + f"/{DATABASE}"


@contextmanager
def stack(track_planning: bool = False) -> Iterator[Stack]:
    with ExitStack() as held:
        pg = held.enter_context(services.postgres(track_planning))
        url, redis_pid = held.enter_context(services.redis_server())
        etcd = held.enter_context(services.etcd_member())
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            conn.execute(Q["tier_create_statements"])
        yield Stack(pg, url, redis_pid, etcd)


def fresh(stack: Stack, dispatch: str, **spec: Any) -> Spec:
    """An empty database migrated for `dispatch`, an empty Redis; the spec of its processes."""
    recreate_database(stack.pg.admin_dsn, DATABASE)
    client = redis.Redis.from_url(stack.redis_url)
    client.flushdb()
    client.close()
    chosen = Spec(stack.dsn, stack.redis_url, dispatch, **spec)
    app = build_app(chosen)
    app.migrate()
    if dispatch == "tiered":
        app.store.tier_partitions(chosen.partitions)
    app.close()
    return chosen


def settle(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(Q["vacuum_analyze"])
        conn.execute(Q["checkpoint"])


# -- processes ----------------------------------------------------------------------------


@dataclass
class Proc:
    """One `bench.tier_proc` process; its stdout lines are queued, with when they came."""

    role: str
    spec: Spec
    log: Path
    lines: queue.Queue[tuple[float, str]] = field(default_factory=queue.Queue)
    proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = os.environ | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.tier_proc", self.role, self.spec.to_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log.open("a"),
            text=True,
            cwd=ROOT,
            env=env,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.time(), line.strip()))

    def expect(self, prefix: str, timeout: float = 60.0) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, line = self.lines.get(timeout=0.1)
            except queue.Empty:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise BenchError(f"{self.role}: no {prefix!r} in {timeout:.0f}s") from None
                continue
            if line.startswith(prefix):
                return at, line

    def go(self) -> None:
        assert self.proc is not None
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise BenchError(f"a {self.role} process exited with {self.proc.returncode}:\n{tail}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def running(settings: Settings, role: str, spec: Spec, ready: int = 1) -> Iterator[Proc]:
    """A started process that said `ready` (`ready` times: an idle spawner once per child)."""
    with started(settings, [(role, spec, ready)]) as [proc]:
        yield proc


@contextmanager
def started(settings: Settings, wanted: Sequence[tuple[str, Spec, int]]) -> Iterator[list[Proc]]:
    """Processes started together (their imports overlap), each waited for until it said
    `ready` as many times as asked; stopped when the block ends."""
    runs = len(list(settings.work_dir.glob("tier-*.log")))
    procs = [
        Proc(role, spec, settings.work_dir / f"tier-{runs + n}-{role}.log")
        for n, (role, spec, _) in enumerate(wanted)
    ]
    try:
        for proc in procs:
            proc.start()
        for proc, (_, _, ready) in zip(procs, wanted, strict=True):
            for _ in range(ready):
                proc.expect("ready", timeout=60.0 + ready)
        yield procs
    finally:
        for proc in procs:
            proc.stop()


@contextmanager
def fleet(settings: Settings, spec: Spec, processes: int) -> Iterator[list[Proc]]:
    """`processes` workers, and for tiered dispatch its leader, all ready, not yet going."""
    wanted = [("worker", spec, 1)] * processes
    if spec.dispatch == "tiered":
        wanted.append(("leader", spec, 1))
    with started(settings, wanted) as procs:
        yield procs


def wait_for(what: str, done: Callable[[], bool], procs: Sequence[Proc], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"tiered figure: {what} not done after {timeout:.0f}s")
        for proc in procs:
            proc.check_alive()
        time.sleep(POLL)


def scalar(conn: psycopg.Connection[Any], name: str, **args: Any) -> Any:
    row = conn.execute(Q[name], args).fetchone()
    return row[0] if row else None


# -- drain ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainRun:
    """One drain; CPU per job in microseconds, by where it was spent."""

    rate: float
    server_us: float  # PostgreSQL, all its processes
    workers_us: float
    leader_us: float  # tiered: the partition leader process
    redis_us: float


def drain_once(settings: Settings, stack: Stack, dispatch: str, processes: int) -> DrainRun:
    jobs = settings.tier_drain_jobs
    spec = fresh(stack, dispatch)
    app = build_app(spec)
    app.enqueue_many(JobSpec("noop") for _ in range(jobs))
    app.close()
    settle(spec.dsn)
    with fleet(settings, spec, processes) as procs, psycopg.connect(spec.dsn) as watch:
        watch.autocommit = True
        before = _drain_cpu(stack, procs)
        started = time.perf_counter()
        for proc in procs:
            proc.go()
        wait_for(
            "drain",
            lambda: not scalar(watch, "chronoq_unfinished", cap=1),
            procs,
            120.0 + jobs / 50,
        )
        seconds = time.perf_counter() - started
        spent = [
            (b - a) / jobs * 1e6 for a, b in zip(before, _drain_cpu(stack, procs), strict=True)
        ]
    return DrainRun(jobs / seconds, *spent)


def _drain_cpu(stack: Stack, procs: Sequence[Proc]) -> tuple[float, float, float, float]:
    """CPU seconds so far: PostgreSQL, the workers, the leader, redis-server."""
    pids = {role: [p.pid for p in procs if p.role == role] for role in ("worker", "leader")}
    return (
        stack.pg.cpu_seconds(),
        cpu.processes_seconds(pids["worker"]),
        cpu.processes_seconds(pids["leader"]),
        cpu.process_seconds(stack.redis_pid),
    )


def figure_drain(settings: Settings, stack: Stack) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for processes in settings.tier_processes:
        for dispatch in MODES:
            runs = [
                drain_once(settings, stack, dispatch, processes) for _ in range(settings.repeats)
            ]
            rows.append(
                {
                    "dispatch": dispatch,
                    "processes": processes,
                    "jobs": settings.tier_drain_jobs,
                    "jobs_per_s": summary([r.rate for r in runs]),
                    "server_cpu_us_per_job": summary([r.server_us for r in runs]),
                    "workers_cpu_us_per_job": summary([r.workers_us for r in runs]),
                    "leader_cpu_us_per_job": summary([r.leader_us for r in runs]),
                    "redis_cpu_us_per_job": summary([r.redis_us for r in runs]),
                }
            )
            settings.log(
                f"tiered/drain {dispatch} {processes}p: "
                f"{rows[-1]['jobs_per_s']['median']:,.0f} jobs/s, CPU µs/job: "
                f"PostgreSQL {rows[-1]['server_cpu_us_per_job']['median']:.0f}, "
                f"workers {rows[-1]['workers_cpu_us_per_job']['median']:.0f}, "
                f"leader {rows[-1]['leader_cpu_us_per_job']['median']:.0f}, "
                f"Redis {rows[-1]['redis_cpu_us_per_job']['median']:.0f}"
            )
    return rows


# -- lateness ------------------------------------------------------------------------------


def steady_rate(drain_rows: Sequence[dict[str, Any]], wanted: float) -> tuple[float, str]:
    """`wanted` jobs/s, or half the drain capacity when that is lower: the lower of the two
    dispatch modes' best drain rates, halved (and why)."""
    best: dict[str, float] = {}
    for row in drain_rows:
        rate = float(row["jobs_per_s"]["median"])
        best[row["dispatch"]] = max(best.get(row["dispatch"], 0.0), rate)
    if not best:
        return wanted, f"{wanted:,.0f} jobs/s (no drain measured)"
    lower = min(best.values())
    if lower / 2 < wanted:
        return round(lower / 2), f"half the lower of the two best drain rates ({lower:,.0f}/s)"
    return wanted, f"{wanted:,.0f} jobs/s (at most half of either mode's best drain rate)"


def lateness_once(
    settings: Settings, stack: Stack, dispatch: str, cases: Sequence[tuple[int, float]]
) -> list[tuple[list[float], list[float]]]:
    """For each case in turn, on one fleet: `jobs` due evenly across `spread` seconds, from a
    lead that covers their enqueue; the start lateness of each case's jobs, and (tiered) the
    lateness of each move.lua call the leader made meanwhile."""
    spec = fresh(stack, dispatch)
    lateness = []
    with fleet(settings, spec, LATENESS_PROCESSES) as procs, psycopg.connect(spec.dsn) as watch:
        watch.autocommit = True
        for proc in procs:
            proc.go()
        app = build_app(spec)
        done = 0
        for jobs, spread in cases:
            first = float(scalar(watch, "tier_db_now")) + 1.0 + jobs / 4_000
            ids = app.enqueue_many(
                JobSpec("noop", run_at=datetime.fromtimestamp(first + spread * n / jobs, UTC))
                for n in range(jobs)
            )
            if float(scalar(watch, "tier_db_now")) > first:
                raise BenchError(f"tiered figure: enqueue of {jobs:,} jobs outran its lead")
            done += jobs
            wait_for("lateness", _reached(watch, done), procs, 60.0 + spread + jobs / 100)
            after = min(e.id for e in ids) - 1
            rows = watch.execute(Q["tier_lateness"], {"after": after})
            lateness.append(([float(row[0]) for row in rows], _move_lateness(procs)))
        app.close()
    return lateness


def _move_lateness(procs: Sequence[Proc]) -> list[float]:
    """The lateness of the move calls the leader has reported since the last read."""
    late = []
    for proc in procs:
        while True:
            try:
                _, line = proc.lines.get_nowait()
            except queue.Empty:
                break
            if line.startswith("moved "):
                late.append(float(line.split()[2]))
    return late


def _reached(watch: psycopg.Connection[Any], done: int) -> Callable[[], bool]:
    return lambda: int(scalar(watch, "tier_done")) >= done


def figure_lateness(
    settings: Settings, stack: Stack, drain_rows: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    rate, why = steady_rate(drain_rows, settings.tier_steady_rate)
    cases = {
        "burst": (settings.tier_burst_jobs, 1.0),
        "steady": (int(rate * settings.tier_steady_s), settings.tier_steady_s),
    }
    runs = {
        dispatch: [
            lateness_once(settings, stack, dispatch, list(cases.values()))
            for _ in range(settings.repeats)
        ]
        for dispatch in MODES
    }
    rows: list[dict[str, Any]] = []
    for index, (case, (jobs, spread)) in enumerate(cases.items()):
        for dispatch in MODES:
            stats = [latency_stats(run[index][0]) for run in runs[dispatch]]
            moves = [latency_stats(run[index][1]) for run in runs[dispatch] if run[index][1]]
            row: dict[str, Any] = {
                "case": case,
                "dispatch": dispatch,
                "jobs": jobs,
                "spread_s": spread,
            }
            row |= {key: summary([r[key] for r in stats]) for key in ("p50_ms", "p99_ms", "max_ms")}
            if moves:
                row["move"] = {key: summary([m[key] for m in moves]) for key in moves[0]}
            rows.append(row)
            settings.log(
                f"tiered/lateness {case} {dispatch}: p50 {row['p50_ms']['median']:.1f} ms, "
                f"p99 {row['p99_ms']['median']:.1f} ms, max {row['max_ms']['median']:.1f} ms"
            )
    return {
        "steady_rate": rate,
        "steady_rate_why": why,
        "processes": LATENESS_PROCESSES,
        "rows": rows,
    }


# -- idle workers --------------------------------------------------------------------------


@dataclass(frozen=True)
class IdleRun:
    statements_per_s: float
    commits_per_s: float
    fetched_per_s: float
    server_cpu_share: float  # PostgreSQL CPU seconds per second, all its processes


def idle_once(settings: Settings, stack: Stack, dispatch: str, workers: int) -> IdleRun:
    # Idle workers hold one pooled connection each (db dispatch adds its LISTEN connection).
    spec = replace(fresh(stack, dispatch), pool_size=1, count=workers, concurrency=10, batch=10)
    with ExitStack() as held, psycopg.connect(stack.pg.admin_dsn) as watch:
        watch.autocommit = True
        if dispatch == "tiered":
            leader = held.enter_context(running(settings, "leader", spec))
            leader.go()
        held.enter_context(running(settings, "idle", spec, ready=workers))
        time.sleep(settings.tier_idle_settle_s)
        before = _activity(watch, stack)
        time.sleep(settings.tier_idle_window_s)
        after = _activity(watch, stack)
    seconds = after[0] - before[0]
    rates = [(b - a) / seconds for a, b in zip(before[1:], after[1:], strict=True)]
    return IdleRun(*rates)


def _activity(watch: psycopg.Connection[Any], stack: Stack) -> tuple[float, ...]:
    """(monotonic, statements, commits, rows fetched, PostgreSQL CPU seconds) now."""
    watch.execute(Q["flush_stats"])
    statements = int(scalar(watch, "tier_statements", db=DATABASE))
    row = watch.execute(Q["tier_database_activity"], {"db": DATABASE}).fetchone()
    commits, fetched = (int(row[0]), int(row[1])) if row else (0, 0)
    return (time.monotonic(), statements, commits, fetched, stack.pg.cpu_seconds())


def figure_idle(settings: Settings, stack: Stack) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for workers in settings.tier_idle_workers:
        for dispatch in MODES:
            # One window each: it is already an average over several poll intervals.
            runs = [idle_once(settings, stack, dispatch, workers)]
            rows.append(
                {
                    "dispatch": dispatch,
                    "workers": workers,
                    "window_s": settings.tier_idle_window_s,
                    "statements_per_s": summary([r.statements_per_s for r in runs]),
                    "commits_per_s": summary([r.commits_per_s for r in runs]),
                    "fetched_per_s": summary([r.fetched_per_s for r in runs]),
                    "server_cpu_pct": summary([100 * r.server_cpu_share for r in runs]),
                }
            )
            settings.log(
                f"tiered/idle {dispatch} {workers} workers: "
                f"{rows[-1]['statements_per_s']['median']:.1f} statements/s, "
                f"PostgreSQL CPU {rows[-1]['server_cpu_pct']['median']:.2f}%"
            )
    return rows


# -- moving timers -------------------------------------------------------------------------


class MoveClock:
    """When each move call's TimersMoved event came, and how many timers were staged by then."""

    def __init__(self) -> None:
        self.staged = 0
        self.moves: list[tuple[float, int, int]] = []  # (perf_counter, moved, staged by then)
        self.done = threading.Event()
        self.expected = 0

    def subscriptions(self) -> list[Subscription[Any]]:
        return [
            Subscription(TimersStaged, self._staged),
            Subscription(TimersMoved, self._moved),
        ]

    def _staged(self, event: TimersStaged) -> None:
        self.staged += event.count

    def _moved(self, event: TimersMoved) -> None:
        self.moves.append((time.perf_counter(), event.count, self.staged))
        if sum(m[1] for m in self.moves) >= self.expected:
            self.done.set()


def move_rate(moves: Sequence[tuple[float, int, int]]) -> float:
    """Timers/s between the end of the first move call and the end of the last (the first
    call's own timers are left out: when it began is not known)."""
    if len(moves) < 2:
        raise BenchError("tiered figure: the timers moved in fewer than two calls")
    seconds = moves[-1][0] - moves[0][0]
    return sum(m[1] for m in moves[1:]) / seconds


def move_once(
    settings: Settings, stack: Stack, batch: int, timers: int, backlog: int
) -> tuple[float, int]:
    spec = fresh(stack, "tiered", partitions=1, move_batch=batch, horizon=30.0)
    app = build_app(spec)
    if backlog:
        with psycopg.connect(spec.dsn, autocommit=True) as conn:
            conn.execute(Q["future_backlog"], {"count": backlog})
        settle(spec.dsn)
    clock = MoveClock()
    clock.expected = timers
    leader = build_leader(app, spec, Observers([clock]))
    stop = threading.Event()
    thread = threading.Thread(target=leader.run, args=(stop,), daemon=True)
    thread.start()
    try:
        with psycopg.connect(spec.dsn, autocommit=True) as watch:
            due = float(scalar(watch, "tier_db_now")) + 1.5 + timers / 10_000
        at = datetime.fromtimestamp(due, UTC)
        app.enqueue_many(JobSpec("noop", run_at=at) for _ in range(timers))
        if not clock.done.wait(60.0 + timers / 500):
            raise BenchError(f"tiered figure: {timers:,} timers not moved at batch {batch}")
    finally:
        stop.set()
        leader.wake()
        thread.join(timeout=30)
        app.close()
    unstaged = timers - clock.moves[0][2]
    return move_rate(clock.moves), unstaged


def figure_move(settings: Settings, stack: Stack) -> list[dict[str, Any]]:
    timers = settings.tier_move_timers
    cases = [(1, max(10, timers // 20), 0), (100, timers, 0), (1_000, timers, 0)]
    cases.append((1_000, timers, settings.tier_move_backlog))
    rows: list[dict[str, Any]] = []
    for batch, count, backlog in cases:
        runs = [move_once(settings, stack, batch, count, backlog) for _ in range(settings.repeats)]
        rows.append(
            {
                "batch": batch,
                "timers": count,
                "backlog": backlog,
                "timers_per_s": summary([rate for rate, _ in runs]),
                # Timers not yet staged when the first move ran: staging raced the move.
                "unstaged_at_first_move": max(unstaged for _, unstaged in runs),
            }
        )
        settings.log(
            f"tiered/move batch {batch} ({backlog:,} beyond the horizon): "
            f"{rows[-1]['timers_per_s']['median']:,.0f} timers/s"
        )
    return rows


# -- failover ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failover:
    fired_s: float  # kill → the probe timer's start
    elected_s: float  # kill → a standby said it leads
    late_s: float  # the probe's start - its run_at


@dataclass
class Leaders:
    """The leader processes of the failover figure and what each last said: `lead` or
    `lost` (a step-down without a kill: a lapsed trust window, say)."""

    procs: list[Proc]
    said: dict[int, tuple[float, str]] = field(default_factory=dict)  # pid → (when, line)
    step_downs: int = 0
    why: dict[str, int] = field(default_factory=dict)  # step-downs by the reason given

    def read(self) -> None:
        for proc in self.procs:
            while True:
                try:
                    at, line = proc.lines.get_nowait()
                except queue.Empty:
                    break
                if line.startswith("lost"):
                    self.step_downs += 1
                    reason = line.split(maxsplit=2)[-1]
                    self.why[reason] = self.why.get(reason, 0) + 1
                if line.startswith(("lead", "lost")):
                    self.said[proc.pid] = (at, line)

    def leading(self, after: float = 0.0) -> Proc | None:
        """The live process whose last word, said after `after`, was that it leads."""
        self.read()
        for proc in self.procs:
            at, line = self.said.get(proc.pid, (0.0, ""))
            if at > after and line.startswith("lead") and proc.proc and proc.proc.poll() is None:
                return proc
        return None

    def wait_leading(self, after: float = 0.0, timeout: float = 60.0) -> tuple[Proc, float]:
        deadline = time.monotonic() + timeout
        while (proc := self.leading(after)) is None:
            if time.monotonic() > deadline:
                raise BenchError("tiered figure: no partition leader after a failover")
            time.sleep(0.005)
        return proc, self.said[proc.pid][0]


def figure_failover(settings: Settings, stack: Stack) -> dict[str, Any]:
    ttl = settings.tier_leader_ttl
    spec = fresh(stack, "tiered", partitions=1, etcd=stack.etcd, leader_ttl=ttl)
    kills: list[Failover] = []
    with ExitStack() as held, psycopg.connect(spec.dsn, autocommit=True) as watch:
        worker = held.enter_context(running(settings, "worker", replace(spec, concurrency=10)))
        worker.go()
        leaders = Leaders([_leader(settings, held, spec, n) for n in range(2)])
        app = build_app(spec)
        held.callback(app.close)
        for n in range(settings.tier_failovers):
            kills.append(_kill_once(app, watch, leaders))
            leaders.procs = [p for p in leaders.procs if p.proc and p.proc.poll() is None]
            leaders.procs.append(_leader(settings, held, spec, n + 2))
            time.sleep(ttl / 2)  # the new standby connects and watches before the next kill
    fired = sorted(k.fired_s for k in kills)
    row = {
        "kills": len(kills),
        "leader_ttl_s": ttl,
        "fired_s": summary(fired),
        "fired_p90_s": round(fired[min(len(fired) - 1, int(0.9 * len(fired)))], 3),
        "elected_s": summary([k.elected_s for k in kills]),
        "late_s": summary([k.late_s for k in kills]),
        "fired_runs_s": [round(k.fired_s, 3) for k in kills],
        "elected_runs_s": [round(k.elected_s, 3) for k in kills],
        "step_downs": leaders.step_downs,
        "step_down_reasons": leaders.why,
    }
    settings.log(
        f"tiered/failover {len(kills)} kills (TTL {ttl:g} s): next timer fired after "
        f"{statistics.median(fired):.2f} s median, {fired[-1]:.2f} s max; "
        f"{leaders.step_downs} step-down(s) without a kill"
    )
    return row


def _leader(settings: Settings, held: ExitStack, spec: Spec, n: int) -> Proc:
    proc = held.enter_context(running(settings, "leader", replace(spec, holder=f"bench-{n}")))
    proc.go()
    return proc


def _kill_once(app: Any, watch: psycopg.Connection[Any], leaders: Leaders) -> Failover:
    """Kill whichever process leads the partition at the kill, a probe due just after it."""
    leaders.wait_leading()
    kill_at = float(scalar(watch, "tier_db_now")) + 0.5
    probe = app.enqueue("noop", run_at=datetime.fromtimestamp(kill_at + LEADER_GRACE, UTC))
    time.sleep(max(0.0, kill_at - time.time()))
    leading, _ = leaders.wait_leading()
    killed = time.time()
    leading.kill()
    _, elected = leaders.wait_leading(after=killed)
    deadline = time.monotonic() + 60.0
    while (started := scalar(watch, "tier_started_at", id=probe.id)) is None:
        if time.monotonic() > deadline:
            raise BenchError("tiered figure: the probe timer never started after a failover")
        time.sleep(POLL)
    started = float(started)
    return Failover(started - killed, elected - killed, started - (kill_at + LEADER_GRACE))


# -- the figure ----------------------------------------------------------------------------


def figure_wheel(settings: Settings) -> dict[str, Any]:
    """The leader's in-memory timing wheel against heapq (bench/timing_wheel.py): no server."""
    cases = timing_wheel.cases_for(settings.smoke)
    return timing_wheel.run(
        timing_wheel.Settings(cases, settings.repeats, settings.smoke, settings.log)
    )


def figure_tiered(settings: Settings) -> dict[str, Any]:
    started = time.monotonic()
    wheel = figure_wheel(settings)
    try:
        with stack() as servers:
            drain = figure_drain(settings, servers)
            result: dict[str, Any] = {"drain": drain}
            result["lateness"] = figure_lateness(settings, servers, drain)
            result["idle"] = figure_idle(settings, servers)
            result["move"] = figure_move(settings, servers)
            result["failover"] = figure_failover(settings, servers)
    except services.ServiceMissing as exc:
        settings.log(f"tiered: not measured, {exc}")
        return {"skipped": str(exc), "wheel": wheel}
    result["wheel"] = wheel
    result["seconds"] = round(time.monotonic() - started, 1)
    result["statements_source"] = "pg_stat_statements"
    return result
