"""A Redis Cluster of the tests' own: 3 masters and 3 replicas on loopback ports, no persistence.

- `redis_cluster`: one cluster for the session (built in about 2 s). Tests share it under key
  prefixes of their own (`redis_prefix` works against it too: see `cluster_prefix`).
- `PrivateRedisCluster(password=...)`: a cluster a test starts itself, with `--requirepass`
  and `--masterauth` when given a password, for the tests that kill nodes or need credentials.

Each node runs `redis-server --cluster-enabled yes --cluster-node-timeout 1000` in a temp dir;
`redis-cli --cluster create ... --cluster-replicas 1` assigns the slots; the fixture returns
once every node reports `cluster_state:ok`. `kill_master_of(key)` SIGKILLs the master serving
a key's slot and waits until its replica has been promoted (about 2 s with a 1 s timeout).
Skips locally when redis-server or redis-cli is missing, fails when CI is set.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from tests.helpers import wait_until

NODES = 6
NODE_TIMEOUT_MS = 1000
_START_TIMEOUT = 30.0
CREATE_OPTIONS = ("--cluster-replicas", "1", "--cluster-yes")


def _missing_service(reason: str) -> None:
    from tests.conftest import _missing_service as missing  # one rule for every service

    missing(reason)


def _binaries() -> tuple[str, str]:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        _missing_service("redis-server or redis-cli is not on PATH (Debian package redis-server)")
        raise AssertionError("unreachable")  # _missing_service skips or fails
    return server, cli


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_ports(count: int) -> list[int]:
    """Ports free with their cluster bus port (port + 10000) too."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(20_000, 45_000)
        if port not in chosen and _free(port) and _free(port + 10_000):
            chosen.append(port)
    return chosen


class PrivateRedisCluster:
    """Six redis-server nodes forming one cluster (3 masters with a replica each)."""

    def __init__(self, password: str | None = None) -> None:
        self.server, self.cli = _binaries()
        self.password = password
        self.root = Path(tempfile.mkdtemp(prefix="chronoq-redis-cluster-"))
        self.ports = _free_ports(NODES)
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """A URL of one node: the client finds the others."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.ports[0]}/0"

    def start(self) -> None:
        for port in self.ports:
            self._start_node(port)
        for port in self.ports:
            wait_until(lambda port=port: self._answers(port), what=f"redis node {port}")
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        auth = ["-a", self.password, "--no-auth-warning"] if self.password else []
        subprocess.run(
            [self.cli, *auth, "--cluster", "create", *nodes, *CREATE_OPTIONS],
            check=True,
            capture_output=True,
            timeout=_START_TIMEOUT,
        )
        wait_until(self.healthy, timeout=_START_TIMEOUT, what="cluster_state:ok on every node")
        # A replica that has never synced with its master refuses to take its place.
        wait_until(self._replicas_synced, timeout=_START_TIMEOUT, what="replicas in sync")

    def _start_node(self, port: int) -> None:
        directory = self.root / str(port)
        directory.mkdir(exist_ok=True)
        auth = ["--requirepass", self.password, "--masterauth", self.password]
        self.processes[port] = subprocess.Popen(
            [
                self.server,
                *("--port", str(port), "--bind", "127.0.0.1"),
                *("--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS)),
                *("--cluster-config-file", str(directory / "nodes.conf")),
                *("--save", "", "--appendonly", "no"),
                *("--dir", str(directory), "--logfile", str(directory / "redis.log")),
                *(auth if self.password else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(
            port=port, password=self.password, socket_connect_timeout=1, socket_timeout=2
        )

    def _answers(self, port: int) -> bool:
        process = self.processes[port]
        if process.poll() is not None:
            log = (self.root / str(port) / "redis.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"redis node {port} exited with {process.returncode}:\n{log}")
        try:
            with self.node(port) as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False

    def _info(self, port: int) -> dict[str, str]:
        with self.node(port) as client:
            text = client.execute_command("CLUSTER INFO")
        if isinstance(text, bytes):
            text = text.decode()
        if isinstance(text, dict):
            return {str(k): str(v) for k, v in text.items()}
        return dict(line.split(":", 1) for line in str(text).split() if ":" in line)

    def _replicas_synced(self) -> bool:
        roles = []
        for port in self.ports:
            with self.node(port) as client:
                roles.append(client.info("replication"))
        replicas = [r for r in roles if r.get("role") == "slave"]
        return len(replicas) == NODES // 2 and all(
            r.get("master_link_status") == "up" for r in replicas
        )

    def healthy(self) -> bool:
        """Every live node reports cluster_state:ok, and 3 masters serve all 16384 slots."""
        try:
            live = [port for port, p in self.processes.items() if p.poll() is None]
            states = [self._info(port) for port in live]
            masters = self.masters()
        except redis.RedisError:
            return False
        return len(masters) == 3 and all(
            s.get("cluster_state") == "ok" and s.get("cluster_slots_ok") == "16384" for s in states
        )

    def masters(self) -> dict[int, list[tuple[int, int]]]:
        """The live masters by port, with the slot ranges each serves."""
        with self.node(self._live_port()) as client:
            slots = client.execute_command("CLUSTER SLOTS")
        served: dict[int, list[tuple[int, int]]] = {}
        for first, last, master, *_ in slots:
            port = int(master[1])
            if self.processes.get(port) is not None and self.processes[port].poll() is None:
                served.setdefault(port, []).append((int(first), int(last)))
        return served

    def _live_port(self) -> int:
        return next(port for port, p in self.processes.items() if p.poll() is None)

    def master_of(self, key: str) -> int:
        with self.node(self._live_port()) as client:
            slot = int(client.execute_command("CLUSTER KEYSLOT", key))
        for port, ranges in self.masters().items():
            if any(first <= slot <= last for first, last in ranges):
                return port
        raise AssertionError(f"no live master serves slot {slot}")

    def kill_master_of(self, key: str, *, wait: bool = True) -> int:
        """SIGKILL the master serving `key`; with `wait`, return once a replica took its slots
        over and the cluster is ok again. Returns the killed port."""
        port = self.master_of(key)
        self.kill(port)
        if wait:
            wait_until(
                lambda: self.healthy() and self.master_of(key) != port,
                timeout=_START_TIMEOUT,
                what=f"a replica promoted in place of {port}",
            )
        return port

    def kill(self, port: int) -> None:
        process = self.processes[port]
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)

    def restart(self, port: int) -> None:
        """Start a killed node again on its nodes.conf: it rejoins (as a replica of the node
        that replaced it)."""
        self._start_node(port)
        wait_until(lambda: self._answers(port), what=f"redis node {port} back")
        wait_until(self.healthy, timeout=_START_TIMEOUT, what="the cluster ok again")
        wait_until(self._replicas_synced, timeout=_START_TIMEOUT, what="replicas in sync")

    def stop(self) -> None:
        for port in list(self.processes):
            self.kill(port)
        shutil.rmtree(self.root, ignore_errors=True)

    def client(self) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self._live_port(), password=self.password)


def started_cluster(password: str | None = None) -> PrivateRedisCluster:
    cluster = PrivateRedisCluster(password)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[PrivateRedisCluster]:
    cluster = started_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_prefix(redis_cluster: PrivateRedisCluster) -> Iterator[str]:
    """A key prefix of the test's own on the shared cluster; its keys are deleted after."""
    prefix = f"chronoq-test-{uuid.uuid4().hex[:8]}"
    yield prefix
    client = redis_cluster.client()
    try:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000, target_nodes="primaries"):
            client.delete(key)
    finally:
        client.close()
