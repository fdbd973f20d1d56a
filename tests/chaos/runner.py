"""Runs one chaos scenario: a fresh database on the private cluster, workers (and schedulers)
as processes, the workload enqueued, faults injected at random moments drawn from a printed
seed, then a wait for every job to settle and the checker's verdict.

The runner also plays the process supervisor: a worker or scheduler it killed is started again
after a short pause, as a real deployment's supervisor would.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg

import chronoq
from tests.chaos.checker import KS_ALPHA, POISON, Fault, Findings, check
from tests.chaos.cluster import PrivateCluster
from tests.chaos.supervised_main import PROCESSES
from tests.chaos.workload import LEASE
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
ANCIENT = datetime(1960, 1, 1, tzinfo=UTC)
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
EFFECTS_TABLE = """
CREATE TABLE chaos_effects (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    token bigint NOT NULL,
    worker text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz
)
"""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    faults: tuple[str, ...]  # drawn from FAULTS at random moments
    jobs: int = 300
    workers: int = 3
    fault_window: float = 10.0  # seconds during which faults are injected
    fault_every: tuple[float, float] = (0.5, 2.0)  # seconds between faults, drawn uniformly
    schedulers: int = 0
    skew: bool = False  # workers' clocks off by +/- 5 minutes (libfaketime)
    # One `chronoq` supervisor over the workers instead of the runner restarting them; its
    # children are the ones killed.
    supervised: bool = False
    poison: int = 0  # jobs whose handler kills its process: they must end dead, at 3 attempts
    ks_alpha: float = KS_ALPHA  # significance of the retry-delay uniformity test
    # Tiered dispatch (tests.chaos.tiered): partition leaders in etcd, timers and streams in a
    # private Redis; jobs fall due at random over the fault window, so faults meet moves.
    tiered: bool = False
    finale: str | None = None  # one more fault, from FAULTS, once the window has passed
    # Jobs due before 1970: a score cannot be negative, yet each must run like any other.
    ancient: int = 0
    # Tiered runs: jobs of a queue no worker reads; their stream entries must not multiply.
    unread: int = 0

    def describe(self) -> str:
        parts = [", ".join(self.faults) or "none"]
        if self.finale is not None:
            parts[0] += f", then {self.finale}"
        if self.tiered:
            parts.append(f"tiered, {self.schedulers} schedulers")
        if self.supervised:
            parts.append(f"under the supervisor, {self.poison} poison jobs")
        if self.skew:
            parts.append("worker clocks skewed +/-5 min")
        if self.ancient:
            parts.append(f"{self.ancient} jobs due before 1970")
        if self.unread:
            parts.append(f"{self.unread} jobs on a queue no worker reads")
        return "; ".join(parts)


@dataclass(slots=True)
class Outcome:
    scenario: Scenario
    seed: int
    faults: list[Fault]
    findings: Findings
    seconds: float
    injected: dict[str, int] = field(default_factory=dict)
    clock_offsets: list[float] = field(default_factory=list)  # workers' clocks minus ours, s

    def summary(self) -> str:
        """One line: the seed, the faults, what the checker counted."""
        found = self.findings
        line = (
            f"{self.scenario.name} seed {self.seed}: {sum(self.injected.values())} faults "
            f"{self.injected}, {found.jobs} jobs, {found.executions} executions, "
            f"{len(found.lost)} lost, {found.extra_explained} extra runs explained, "
            f"{len(found.violations)} violation(s), retry KS D {found.ks_statistic:.3f} "
            f"(n={found.retries_measured}), {self.seconds:.0f}s"
        )
        tier = found.tier
        if tier is not None:
            line += (
                f"; tier: {tier.writes} fenced writes ({tier.moves} moves), stale refused "
                f"{tier.stale_refused} (moves {tier.stale_moves_refused}), resumed leaders' "
                f"stale writes {tier.resumed_stale} (refused {tier.resumed_refused}), accepted "
                f"{len(tier.stale_accepted)}, duplicate entries {tier.duplicate_entries}, "
                f"failover {_seconds(tier.failovers)} (compound "
                f"{_seconds(tier.compound_failovers)}), first move after a Redis restart "
                f"{_seconds(tier.redis_recoveries)}"
            )
            if tier.held_answers:
                line += f", writes held by a cut answered after it {dict(tier.held_answers)}"
        return line


def _seconds(values: list[float]) -> str:
    return f"max {max(values):.2f}s n={len(values)}" if values else "-"


class Run:
    def __init__(self, cluster: PrivateCluster, scenario: Scenario, seed: int, work: Path):
        self.cluster = cluster
        self.scenario = scenario
        self.rng = random.Random(seed)
        self.seed = seed
        self.work = work
        self.database = f"chaos_{uuid.uuid4().hex[:10]}"
        self.dsn = cluster.dsn.rsplit("/", 1)[0] + f"/{self.database}"
        self.workers: list[subprocess.Popen[bytes]] = []
        self.schedulers: list[subprocess.Popen[bytes]] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self.paused_ticks: frozenset[int] = frozenset()

    # -- setup ------------------------------------------------------------------------------

    def prepare(self) -> dict[int, int]:
        with psycopg.connect(self.cluster.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        with self.open_app() as app:
            app.migrate()
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(EFFECTS_TABLE)
            specs, planned = self._workload()
            ids = [result.id for result in app.enqueue_many(specs)]
        return dict(zip(ids, planned, strict=True))

    def open_app(self) -> chronoq.App:
        return chronoq.App(self.dsn)

    def _workload(self) -> tuple[list[chronoq.JobSpec], list[int]]:
        specs, planned = [], []
        for _ in range(self.scenario.jobs):
            fail_first = self.rng.choice((0, 0, 0, 0, 1, 2, 3))
            # Mostly short work, some long enough to need heartbeats (a third of the lease).
            ms = self.rng.choice((5, 20, 50, 100, 200)) if self.rng.random() < 0.9 else 1500
            window = self.scenario.fault_window
            delay = self.rng.uniform(0, window) if self.scenario.tiered else None
            specs.append(
                chronoq.JobSpec(
                    "work", {"ms": ms, "fail_first": fail_first}, queue="chaos", delay=delay
                )
            )
            planned.append(fail_first)
        for _ in range(self.scenario.ancient):
            specs.append(
                chronoq.JobSpec("work", {"ms": 5, "fail_first": 0}, queue="chaos", run_at=ANCIENT)
            )
            planned.append(0)
        for position in sorted(self.rng.sample(range(len(specs) + 1), self.scenario.poison)):
            specs.insert(position, chronoq.JobSpec("poison", {}, queue="chaos"))
            planned.insert(position, POISON)
        return specs, planned

    def _env(self, index: int) -> dict[str, str]:
        env = {
            **os.environ,
            "CHRONOQ_DSN": f"{self.dsn}?application_name=chaos-worker",
            "CHAOS_HISTORY": str(self.work / f"history-{self.database}.jsonl"),
            "PYTHONPATH": str(REPO),
        }
        if self.scenario.skew:
            env["LD_PRELOAD"] = str(FAKETIME)
            env["FAKETIME"] = "+5m" if index % 2 == 0 else "-5m"
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env

    def start_worker(self, index: int) -> subprocess.Popen[bytes]:
        main = "supervised_main" if self.scenario.supervised else "worker_main"
        argv = [sys.executable, "-m", f"tests.chaos.{main}"]
        return self._spawn(argv, self._env(index), f"worker-{index}")

    def start_scheduler(self, index: int) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "chronoq", "scheduler", "--app", "tests.chaos.workload:app"]
        env = {**os.environ, "CHRONOQ_DSN": self.dsn, "PYTHONPATH": str(REPO)}
        return self._spawn([*argv, "--lookahead", "2s"], env, f"scheduler-{index}")

    def _spawn(self, argv: list[str], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        with (self.work / f"{name}-{self.database}.log").open("ab") as log:
            return subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    # -- faults -----------------------------------------------------------------------------

    def db_now(self) -> datetime:
        def read() -> datetime | None:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    row = conn.execute("SELECT clock_timestamp()").fetchone()
            except psycopg.OperationalError:
                return None
            return row[0] if row else None

        return wait_until(read, timeout=60, what="the database clock")

    def record(self, kind: str, target: int | None = None) -> None:
        fault = Fault(kind, self.db_now(), target)
        with self._lock:
            self.faults.append(fault)

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def kill_worker(self) -> None:
        if self.scenario.supervised:
            self._kill_child()
            return
        index = self.rng.randrange(len(self.workers))
        process = self.workers[index]
        if process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.record("kill_worker", process.pid)
        self.later(0.3, lambda: self._replace_worker(index))

    def _kill_child(self) -> None:
        """SIGKILL one of the supervisor's worker processes; the supervisor replaces it."""
        supervisor = self.workers[0].pid
        try:
            children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
        except OSError:
            return
        if not children:
            return
        victim = int(self.rng.choice(sorted(children)))
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
            self.record("kill_worker", victim)

    def _replace_worker(self, index: int) -> None:
        with self._lock:
            self.workers[index] = self.start_worker(index)

    def stop_worker(self) -> None:
        """SIGSTOP for twice the lease: its jobs are rescued and run elsewhere; when it wakes,
        its heartbeats and results carry stale tokens and must be refused."""
        process = self.rng.choice(self.workers)
        if process.poll() is not None:
            return
        process.send_signal(signal.SIGSTOP)
        self.record("stop_worker", process.pid)
        self.later(
            2 * LEASE, lambda: process.poll() is None and process.send_signal(signal.SIGCONT)
        )

    def terminate_backends(self) -> None:
        with psycopg.connect(self.cluster.dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'chaos-worker'"
            )
        self.record("terminate_backends")

    def restart_fast(self) -> None:
        self.cluster.restart("fast")
        self.record("restart_fast")

    def restart_immediate(self) -> None:
        self.cluster.restart("immediate")
        self.record("restart_immediate")

    def kill_leader(self) -> None:
        with psycopg.connect(self.dsn) as conn:
            row = conn.execute(
                "SELECT holder FROM chronoq_leaders WHERE duty = 'scheduler' "
                "AND expires_at > clock_timestamp()"
            ).fetchone()
        if row is None:
            return
        pid = int(str(row[0]).split(":")[1])
        for index, process in enumerate(self.schedulers):
            if process.pid == pid and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
                self.record("kill_leader", pid)
                self.later(1.0, lambda i=index: self._replace_scheduler(i))  # type: ignore[misc]

    def _replace_scheduler(self, index: int) -> None:
        with self._lock:
            self.schedulers[index] = self.start_scheduler(index)

    def long_transaction(self) -> None:
        """A transaction left open for 5 s holds back vacuum (its snapshot keeps dead rows)."""
        conn = psycopg.connect(self.dsn)
        conn.execute("SELECT txid_current(), count(*) FROM chronoq_jobs").fetchone()
        self.record("long_transaction")
        self.later(5.0, conn.close)

    # -- the run ----------------------------------------------------------------------------

    def execute(self) -> Outcome:
        began = time.monotonic()
        self._started_wall = time.time()
        enqueued = self.prepare()
        try:
            count = 1 if self.scenario.supervised else self.scenario.workers
            self.workers = [self.start_worker(i) for i in range(count)]
            self.schedulers = [self.start_scheduler(i) for i in range(self.scenario.schedulers)]
            self._await_workers(PROCESSES if self.scenario.supervised else count)
            self.ready()
            self._inject()
            for timer in self._timers:
                timer.join()
            self.join_watchers()
            self.wind_down()
            self._settle()
            self._stop(self.schedulers)
            self._stop(self.workers)
        finally:
            # Whatever went wrong (a timeout included), leave no process behind.
            for process in [*self.schedulers, *self.workers]:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        histories = sorted(self.work.glob(f"history-{self.database}.jsonl"))
        findings = self.check(histories, enqueued)
        injected: dict[str, int] = {}
        for fault in self.faults:
            injected[fault.kind] = injected.get(fault.kind, 0) + 1
        return Outcome(
            self.scenario,
            self.seed,
            self.faults,
            findings,
            time.monotonic() - began,
            injected,
            self._clock_offsets(histories),
        )

    def _await_workers(self, count: int) -> None:
        """Until `count` workers have opened the store. A worker whose database is down when
        it starts exits (a process manager starts it again; here only a fault would), so a
        restart injected while they still start would leave no worker at all."""
        history = self.work / f"history-{self.database}.jsonl"

        def started() -> bool:
            if not history.exists():
                return False
            lines = history.read_text(encoding="utf-8").splitlines()
            return sum('"start"' in line and '"wall"' in line for line in lines) >= count

        wait_until(started, timeout=60, what=f"{count} chaos workers to open the store")

    def ready(self) -> None:
        """Wait, before the first fault, until the fleet is up (the tiered fleet overrides)."""

    def join_watchers(self) -> None:
        """Wait for what measures the faults' effects (the tiered fleet overrides)."""

    def wind_down(self) -> None:
        """Before the wait for every job to settle: schedulers stop first, so every tick they
        fired runs before the workers stop."""
        self._stop(self.schedulers)

    def check(self, histories: list[Path], enqueued: dict[int, int]) -> Findings:
        return check(
            self.dsn,
            histories,
            self.faults,
            enqueued,
            self.scenario.ks_alpha,
            self.paused_ticks,
        )

    def _clock_offsets(self, histories: list[Path]) -> list[float]:
        """How far each worker's clock was from ours when it started (the skew, if any)."""
        offsets = []
        for path in histories:
            for line in path.read_text(encoding="utf-8").splitlines():
                if '"start"' in line and '"wall"' in line:
                    offsets.append(json.loads(line)["wall"] - self._started_wall)
        return offsets

    def _inject(self) -> None:
        if not self.scenario.faults:
            return
        deadline = time.monotonic() + self.scenario.fault_window
        low, high = self.scenario.fault_every
        while time.monotonic() < deadline:
            threading.Event().wait(self.rng.uniform(low, high))  # the gap between two faults
            getattr(self, self.rng.choice(self.scenario.faults))()
        if self.scenario.finale is not None:
            getattr(self, self.scenario.finale)()

    # Queues whose jobs are never meant to run (no worker reads them): not waited for.
    unserved: tuple[str, ...] = ()

    def _settle(self) -> None:
        def settled() -> bool:
            with psycopg.connect(self.dsn) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM chronoq_jobs "
                    "WHERE status NOT IN ('done', 'dead', 'cancelled', 'skipped')"
                    " AND queue <> ALL(%s)",
                    (list(self.unserved),),
                ).fetchone()
            return row is not None and row[0] == 0

        # Jobs that do not settle in time are reported by the checker as lost.
        with contextlib.suppress(AssertionError):
            wait_until(settled, timeout=120, what="every job to settle")

    def _stop(self, processes: list[subprocess.Popen[bytes]]) -> None:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


SCENARIOS = {
    "baseline": Scenario("baseline", ()),
    "worker-sigkill": Scenario("worker-sigkill", ("kill_worker",)),
    "worker-sigstop": Scenario("worker-sigstop", ("stop_worker",), fault_every=(1.0, 3.0)),
    "connections-cut": Scenario("connections-cut", ("terminate_backends",)),
    "postgres-restart": Scenario(
        "postgres-restart", ("restart_fast", "restart_immediate"), fault_every=(2.0, 4.0)
    ),
    "scheduler-leader-sigkill": Scenario(
        "scheduler-leader-sigkill", ("kill_leader",), schedulers=2, fault_every=(2.0, 4.0)
    ),
    "vacuum-held-back": Scenario("vacuum-held-back", ("long_transaction", "kill_worker")),
    "clock-skew": Scenario("clock-skew", ("kill_worker",), skew=True),
    "supervised-poison": Scenario("supervised-poison", ("kill_worker",), supervised=True, poison=3),
    "everything": Scenario(
        "everything",
        (
            "kill_worker",
            "stop_worker",
            "terminate_backends",
            "restart_fast",
            "restart_immediate",
            "long_transaction",
            "kill_leader",
        ),
        schedulers=2,
        fault_every=(1.0, 2.5),
    ),
}
