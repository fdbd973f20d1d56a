"""Chaos over a tiered fleet: 3 schedulers leading partitions (elected in a 3-member etcd), 3
workers reading Redis Streams, a private Redis without persistence, the private PostgreSQL.

```
 TierServices (one per session): EtcdCluster (tests.services.etcd) + PrivateRedis
 TieredRun(Run): per run a key prefix of its own in etcd and Redis; schedulers are
                 tests.chaos.scheduler_main (their fenced writes go to the history)
   faults:  kill_partition_leader   SIGKILL a scheduler that leads a partition; a watcher
                                     measures until every partition has a live leader again
            stop_partition_leader   SIGSTOP one for twice the TTL, then SIGCONT
            restart_redis           SIGKILL Redis and start it again, empty
            lose_etcd_member        SIGKILL one member, restart it on its data dir
            lose_etcd_quorum        SIGKILL two members for a few seconds, restart both
   network partitions (tests.services.netfault: each scheduler reaches every etcd member and
   Redis through relays of its own, which hold every byte while cut):
            cut_leader_from_etcd    a partition leader cut off from every etcd member past its
                                     lease (2 TTLs), then healed; Redis and PostgreSQL still reach
            cut_leader_from_redis   a partition leader cut off from Redis for 1-5 s; what it had
                                     sent arrives after the heal
            cut_etcd_member         every scheduler cut off from one etcd member for 1-3 s
```

What the injector measured goes to the tier rules of tests.chaos.tiercheck.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

import chronoq
from chronoq.errors import ChronoqError
from chronoq.tier.etcd import EtcdElector
from chronoq.tier.redis.keys import partition_keys
from tests.chaos.checker import Findings, read_histories
from tests.chaos.cluster import ClusterUnavailable, PrivateCluster
from tests.chaos.runner import REPO, Outcome, Run, Scenario
from tests.chaos.tiercheck import Cut, Failover, TierFaults, Window, check_tier
from tests.helpers import wait_until
from tests.services.etcd import EtcdCluster, etcd_binary
from tests.services.netfault import Link, Network
from tests.services.redis import PrivateRedis

PARTITIONS = 6
TTL = 2.0  # leader_ttl: failover in about 2 s; too tight for production, fine on loopback
FAILOVER_PATIENCE = 30.0
# Seconds without quorum, drawn uniformly: long enough to outlast what a leader may still do
# (tests.chaos.tiercheck: 2 election timeouts + ttl / 2, 3 s here).
QUORUM_LOSS = (4.0, 6.0)
ELECTION_TIMEOUT = 1.0  # tests.services.etcd starts members with --election-timeout 1000
MEMBER_LOSS = (1.0, 3.0)
ETCD_CUT = 2 * TTL + 0.5  # past the lease: a successor takes the partitions, then the heal
REDIS_CUT = (1.0, 5.0)  # shorter than the client's socket timeout (10 s): answers come late
REBUILD_WRITES = 200  # writes to the old etcd first: its revisions end far above the new one's
RESTAGE_AFTER = 2.0  # seconds: entries are looked at again several times within a run
UNREAD_QUEUE = "unread"  # no worker of the chaos fleet reads it
DEMOTED = (2.0, 4.0)  # seconds Redis spends as a replica of a master that does not exist
NETWORK_FAULTS = ("cut_leader_from_etcd", "cut_leader_from_redis", "cut_etcd_member")


class TierServices:
    """The etcd cluster and the Redis server every tiered run of a session shares."""

    def __init__(self) -> None:
        binary, server = etcd_binary(), shutil.which("redis-server")
        if binary is None or server is None:
            raise ClusterUnavailable("tiered chaos needs /usr/bin/etcd and redis-server")
        self.root = Path(tempfile.mkdtemp(prefix="chronoq-chaos-tier-"))
        self.etcd = EtcdCluster(binary, self.root / "etcd")
        (self.root / "redis").mkdir()
        self.redis = PrivateRedis(server, self.root / "redis")

    def create(self) -> None:
        self.etcd.start()
        self.redis.start()

    def heal(self) -> None:
        """Every member up and Redis answering: a run's faults never leak into the next."""
        self.etcd.heal()
        if self.redis.process is None or self.redis.process.poll() is not None:
            self.redis.start()

    def destroy(self) -> None:
        self.redis.stop()
        self.etcd.close()
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class SchedulerLinks:
    """The relays one scheduler reaches the tier's servers through."""

    etcd: list[Link]  # one per member, in the members' order
    redis: Link

    def env(self, redis_url: str) -> dict[str, str]:
        database = redis_url.rsplit("/", 1)[1]
        return {
            "CHRONOQ_REDIS_URL": f"{self.redis.url('redis')}/{database}",
            "CHRONOQ_ETCD_ENDPOINTS": ",".join(link.url("http") for link in self.etcd),
        }

    def all(self) -> list[Link]:
        return [*self.etcd, self.redis]


class TieredRun(Run):
    def __init__(
        self,
        cluster: PrivateCluster,
        scenario: Scenario,
        seed: int,
        work: Path,
        tier: TierServices,
    ) -> None:
        super().__init__(cluster, scenario, seed, work)
        self.tier = tier
        self.prefix = f"chaos-{self.database}"
        self.measured = TierFaults(TTL, ELECTION_TIMEOUT)
        self._watchers: list[threading.Thread] = []
        self._observer = EtcdElector(
            tier.etcd.endpoints, "chaos-observer", PARTITIONS, ttl=TTL, prefix=self.prefix
        )
        # Relays only where a fault cuts them: elsewhere schedulers talk to the servers directly.
        network_faults = set(NETWORK_FAULTS) & {*scenario.faults, scenario.finale}
        self._network = Network() if network_faults else None
        self._links: dict[int, SchedulerLinks] = {}
        self.rebuilt = False
        self.unserved = (UNREAD_QUEUE,) if scenario.unread else ()

    # -- the fleet --------------------------------------------------------------------------

    def tier_env(self) -> dict[str, str]:
        return {
            "CHRONOQ_DISPATCH": "tiered",
            "CHRONOQ_REDIS_URL": self.tier.redis.url,
            "CHRONOQ_ETCD_ENDPOINTS": ",".join(self.tier.etcd.endpoints),
            "CHRONOQ_REDIS_PREFIX": self.prefix,
            "CHRONOQ_PARTITIONS": str(PARTITIONS),
            "CHRONOQ_LEADER_TTL": str(TTL),
        }

    def prepare(self) -> dict[int, int]:
        enqueued = super().prepare()
        if self.scenario.unread:
            with self.open_app() as app:
                specs = [
                    chronoq.JobSpec("work", {"ms": 5, "fail_first": 0}, queue=UNREAD_QUEUE)
                    for _ in range(self.scenario.unread)
                ]
                app.enqueue_many(specs)
        return enqueued

    def open_app(self) -> chronoq.App:
        return chronoq.App(
            self.dsn,
            dispatch="tiered",
            redis_url=self.tier.redis.url,
            etcd_endpoints=",".join(self.tier.etcd.endpoints),
            redis_prefix=self.prefix,
            partitions=PARTITIONS,
            leader_ttl=TTL,
        )

    def _env(self, index: int) -> dict[str, str]:
        return {**super()._env(index), **self.tier_env()}

    def start_scheduler(self, index: int) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "CHRONOQ_DSN": self.dsn,
            "CHAOS_HISTORY": str(self.work / f"history-{self.database}.jsonl"),
            "PYTHONPATH": str(REPO),
            "CHAOS_RESTAGE_AFTER": str(RESTAGE_AFTER),
            **self.tier_env(),
        }
        links = self._scheduler_links(index)
        if links is not None:
            env.update(links.env(self.tier.redis.url))
        argv = [sys.executable, "-m", "tests.chaos.scheduler_main"]
        return self._spawn(argv, env, f"scheduler-{index}")

    def _scheduler_links(self, index: int) -> SchedulerLinks | None:
        """The relays of scheduler `index` (made at its first start, healed at every start: a
        replacement process has the links of the one it replaces)."""
        if self._network is None:
            return None
        links = self._links.get(index)
        if links is None:
            links = SchedulerLinks(
                [self._network.link("127.0.0.1", m.client_port) for m in self.tier.etcd.members],
                self._network.link("127.0.0.1", self.tier.redis.port),
            )
            self._links[index] = links
        for link in links.all():
            link.heal()
        return links

    def execute(self) -> Outcome:
        self.tier.heal()
        try:
            return super().execute()
        finally:
            self._observer.close()
            if self._network is not None:
                self._network.close()
            self.tier.heal()
            self.tier.etcd.delete_prefix(self.prefix + "/")

    def ready(self) -> None:
        """Every partition led, by every scheduler: faults start on a settled fleet."""
        wait_until(self._settled, timeout=60, what="every partition led by every scheduler")

    def _settled(self) -> bool:
        leaders = self._leaders()
        pids = {process.pid for process in self.schedulers}
        holders = set(leaders.values()) if leaders else set()
        return (
            leaders is not None
            and len(leaders) == PARTITIONS
            and {_pid(h) for h in holders} == pids
        )

    def _leaders(self) -> dict[int, str] | None:
        """partition -> holder, from etcd; None when etcd does not answer."""
        try:
            return {lead.partition: lead.holder for lead in self._observer.leaders()}
        except ChronoqError:
            return None

    def wind_down(self) -> None:
        """Jobs reach workers only through partition leaders, so the schedulers keep running
        while the last jobs settle; pausing the tick schedule lets the jobs run out."""
        with self.open_app() as app:
            app.store.schedule_pause("tick", True)
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT id FROM chronoq_jobs WHERE schedule = 'tick' AND status = 'cancelled'"
            ).fetchall()
        self.paused_ticks = frozenset(row[0] for row in rows)  # nothing else cancels here
        self._revive()

    def _revive(self) -> None:
        """Start again a scheduler that exited on its own (one started while PostgreSQL was
        restarting, or etcd had no quorum, says so and exits), as a supervisor would."""
        for index, process in enumerate(self.schedulers):
            if process.poll() is not None:
                self._replace_scheduler(index)

    def join_watchers(self) -> None:
        for watcher in self._watchers:
            watcher.join()

    def check(self, histories: list[Path], enqueued: dict[int, int]) -> Findings:
        findings = super().check(histories, enqueued)
        findings.tier = check_tier(read_histories(histories), self.measured)
        if self.rebuilt and not _forced_take_overs(histories):
            findings.tier.not_overridden.append(
                "etcd was rebuilt, yet no partition was taken over from the old epochs"
            )
        if self.scenario.unread:
            entries = self._unread_entries()
            if entries > self.scenario.unread:
                findings.tier.stream_growth.append(
                    f"{entries} stream entries for {self.scenario.unread} jobs of a queue no"
                    " worker reads: waiting entries were staged again"
                )
        return findings

    def _unread_entries(self) -> int:
        client = redis.Redis.from_url(self.tier.redis.url)
        try:
            return sum(
                int(client.xlen(partition_keys(self.prefix, p).stream(UNREAD_QUEUE)))
                for p in range(PARTITIONS)
            )
        finally:
            client.close()

    # -- faults -----------------------------------------------------------------------------

    def _leader_process(self) -> tuple[int, subprocess.Popen[bytes]] | None:
        """A running scheduler that leads a partition now, drawn at random."""
        leaders = self._leaders() or {}
        pids = sorted({_pid(holder) for holder in leaders.values()})
        running = {p.pid: (i, p) for i, p in enumerate(self.schedulers) if p.poll() is None}
        candidates = [pid for pid in pids if pid in running]
        if not candidates:
            return None
        return running[self.rng.choice(candidates)]

    def kill_partition_leader(self) -> None:
        chosen = self._leader_process()
        if chosen is None:
            return
        index, process = chosen
        process.send_signal(signal.SIGKILL)
        killed_at = time.time()
        process.wait()
        self.record("kill_partition_leader", process.pid)
        self.measured.leader_faults.append(killed_at)
        self._watch(lambda: self._measure_failover(process.pid, killed_at))
        self.later(1.0, lambda: self._replace_scheduler(index))

    def _measure_failover(self, victim: int, killed_at: float) -> None:
        def led_again() -> bool:
            leaders = self._leaders()
            return (
                leaders is not None
                and len(leaders) == PARTITIONS
                and all(_pid(holder) != victim for holder in leaders.values())
            )

        try:
            wait_until(led_again, timeout=FAILOVER_PATIENCE, what="every partition led again")
        except AssertionError:
            self.measured.failovers.append(Failover(killed_at, None))
            return
        self.measured.failovers.append(Failover(killed_at, time.time() - killed_at))

    def stop_partition_leader(self) -> None:
        """SIGSTOP past the TTL: a successor takes its partitions; resumed, every write it
        still attempts for them must be refused by the epoch."""
        chosen = self._leader_process()
        if chosen is None:
            return
        _, process = chosen
        process.send_signal(signal.SIGSTOP)
        self.measured.leader_faults.append(time.time())
        self.record("stop_partition_leader", process.pid)

        def resume() -> None:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                self.measured.resumed.append((process.pid, time.time()))

        self.later(2 * TTL + 0.5, resume)

    def restart_redis(self) -> None:
        self.tier.redis.restart()
        self.measured.redis_restarts.append(time.time())
        self.record("restart_redis")

    def rebuild_etcd(self) -> None:
        """etcd replaced by a new, empty cluster on the same endpoints: leases, keys and
        revisions start over, so the new leaders' epochs are below those Redis holds. They must
        take the partitions over anyway (after a lease's time to live) and dispatch goes on."""
        start = time.time()
        self.tier.etcd.rebuild(writes_before=REBUILD_WRITES)
        self.record("rebuild_etcd")
        self.rebuilt = True
        self.measured.quorum_losses.append(Window(start, time.time()))

    def demote_redis(self) -> None:
        """Redis made the replica of a master that does not exist (read-only: every write and
        every group read fails with READONLY), then promoted again, as in a failover. Leaders
        and workers must carry on without a restart."""
        client = redis.Redis.from_url(self.tier.redis.url)
        try:
            client.replicaof("127.0.0.1", str(self.tier.redis.port + 1))
            self.record("demote_redis")
            threading.Event().wait(self.rng.uniform(*DEMOTED))  # the fault's duration
            client.replicaof("NO", "ONE")
        finally:
            client.close()
        self.measured.redis_restarts.append(time.time())

    def lose_etcd_member(self) -> None:
        member = self.rng.randrange(len(self.tier.etcd.members))
        start = time.time()
        self.tier.etcd.kill(member)
        self.record("lose_etcd_member", member)
        threading.Event().wait(self.rng.uniform(*MEMBER_LOSS))  # the fault's duration
        self.tier.etcd.restart(member)
        self.measured.member_losses.append(Window(start, time.time()))

    def lose_etcd_quorum(self) -> None:
        members = self.rng.sample(range(len(self.tier.etcd.members)), 2)
        for member in members:
            self.tier.etcd.kill(member)
        start = time.time()
        self.record("lose_etcd_quorum")
        threading.Event().wait(self.rng.uniform(*QUORUM_LOSS))  # the fault's duration
        self.measured.quorum_losses.append(Window(start, time.time()))
        for member in members:
            self.tier.etcd.restart(member, wait_healthy=False)
        self.tier.etcd.wait_healthy(members)

    # -- network partitions -----------------------------------------------------------------

    def cut_leader_from_etcd(self) -> None:
        """No etcd member hears a leader past its lease: it must stop acting within its trust
        window and a successor takes its partitions; after the heal, every write it still
        sends under a superseded epoch must be refused."""
        chosen = self._leader_process()
        if chosen is None:
            return
        index, process = chosen
        links = self._links[index].etcd
        for link in links:
            link.cut()
        cut_at = time.time()  # after the cut: its last renewal was sent before this
        self.record("cut_leader_from_etcd", process.pid)
        self.measured.leader_faults.append(cut_at)
        self._watch(lambda: self._measure_failover(process.pid, cut_at))

        def heal() -> None:
            for link in links:
                link.heal()
            healed = time.time()
            self.measured.resumed.append((process.pid, healed))
            self.measured.etcd_cuts.append(Cut(process.pid, cut_at, healed))

        self.later(ETCD_CUT, heal)

    def cut_leader_from_redis(self) -> None:
        """A leader whose writes to Redis go unanswered for seconds: its mover waits on the
        socket (and may lose its lease meanwhile); what it sent reaches Redis after the heal,
        where the epoch decides."""
        chosen = self._leader_process()
        if chosen is None:
            return
        index, process = chosen
        link = self._links[index].redis
        lasting = self.rng.uniform(*REDIS_CUT)
        link.cut()
        cut_at = time.time()
        self.record("cut_leader_from_redis", process.pid)
        self.measured.leader_faults.append(cut_at)

        def heal() -> None:
            link.heal()
            self.measured.redis_cuts.append(Cut(process.pid, cut_at, time.time()))

        self.later(lasting, heal)

    def cut_etcd_member(self) -> None:
        """Every scheduler cut off from one member (which still reaches the others): requests
        to it time out instead of being refused, and clients must move on to another member
        with no leader change."""
        member = self.rng.randrange(len(self.tier.etcd.members))
        links = [scheduler.etcd[member] for scheduler in self._links.values()]
        start = time.time()
        for link in links:
            link.cut()
        self.record("cut_etcd_member", member)
        threading.Event().wait(self.rng.uniform(*MEMBER_LOSS))  # the fault's duration
        for link in links:
            link.heal()
        self.measured.member_losses.append(Window(start, time.time()))

    def _watch(self, measure: Callable[[], None]) -> None:
        watcher = threading.Thread(target=measure, daemon=True)
        self._watchers.append(watcher)
        watcher.start()


def _forced_take_overs(histories: list[Path]) -> int:
    return sum(
        1
        for event in read_histories(histories)
        if event.get("event") == "tier_takeover" and event.get("force") and event["accepted"]
    )


def _pid(holder: str) -> int:
    """The process id in a scheduler's holder name (host:pid:random)."""
    with contextlib.suppress(IndexError, ValueError):
        return int(holder.split(":")[1])
    return -1


def _tiered(
    name: str,
    faults: tuple[str, ...],
    every: tuple[float, float],
    finale: str | None = None,
    ancient: int = 0,
    unread: int = 0,
) -> Scenario:
    """A scenario over the tiered fleet: 3 schedulers, a fault every `every` seconds."""
    return Scenario(
        name,
        faults,
        schedulers=3,
        fault_every=every,
        tiered=True,
        finale=finale,
        ancient=ancient,
        unread=unread,
    )


# Kills and etcd cuts of leaders come further apart than a failover's span (2 TTLs before, the
# bound after): most failovers are measured alone, against the bound.
APART = (4.5, 6.5)
TIER_SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        _tiered("partition-leader-sigkill", ("kill_partition_leader",), APART),
        _tiered("partition-leader-sigstop", ("stop_partition_leader",), (2.0, 4.0)),
        _tiered("redis-restart-empty", ("restart_redis",), (2.0, 4.0)),
        _tiered("etcd-member-loss", ("lose_etcd_member",), (1.0, 2.0), finale="lose_etcd_quorum"),
        _tiered(
            "tiered-everything",
            (
                "kill_partition_leader",
                "stop_partition_leader",
                "restart_redis",
                "lose_etcd_member",
                "lose_etcd_quorum",
                "kill_worker",
                "restart_fast",
            ),
            (1.5, 3.0),
        ),
        # Network partitions (tests.services.netfault).
        _tiered("leader-cut-from-etcd", ("cut_leader_from_etcd",), APART),
        _tiered("leader-cut-from-redis", ("cut_leader_from_redis",), (3.0, 6.0)),
        _tiered("etcd-member-cut-off", ("cut_etcd_member",), (1.0, 2.0)),
    )
}
# Faults that stopped tiered dispatch, or let its streams grow, before they were fixed: run by
# `make chaos`; the suite runs etcd-rebuilt short (tests/chaos/test_tier_regressions.py), the
# others' faults have tests of their own against real servers.
REGRESSION_SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        _tiered("rows-due-before-1970", ("kill_partition_leader",), APART, ancient=20),
        _tiered("queue-no-worker-reads", ("kill_partition_leader",), APART, unread=50),
        _tiered("etcd-rebuilt", ("rebuild_etcd",), (3.0, 5.0)),
        _tiered("redis-demoted", ("demote_redis",), (3.0, 5.0)),
    )
}


def open_run(
    cluster: PrivateCluster,
    scenario: Scenario,
    seed: int,
    work: Path,
    tier: TierServices | None,
) -> Run:
    """The run of `scenario`: over a tiered fleet when it says so (then `tier` is required)."""
    if not scenario.tiered:
        return Run(cluster, scenario, seed, work)
    assert tier is not None, f"{scenario.name} runs over a tiered fleet: pass TierServices"
    from tests.chaos.tiered_cluster import CLUSTER_SCENARIOS, ClusterTieredRun  # imports this

    if scenario.name in CLUSTER_SCENARIOS:
        return ClusterTieredRun(cluster, scenario, seed, work, tier)
    return TieredRun(cluster, scenario, seed, work, tier)
