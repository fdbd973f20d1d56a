"""A real 3-member etcd cluster on loopback for the tests, started once per test run.

```
 member i:  client http://127.0.0.1:C_i   (what electors talk to: `cluster.endpoints[i]`)
            peer   http://127.0.0.1:P_i   (raft between the members)
            data   <temp>/m<i>            (kept across restart(i), removed at teardown)
```

The members are started from the `etcd` binary (Debian's `etcd-server`: /usr/bin/etcd or `etcd` on
PATH) with a heartbeat of 100 ms and an election timeout of 1 s, so a lost raft leader is replaced
within about a second and a 2 s lease TTL is usable in tests. Each run gets its own cluster token,
so members of an older run that were left behind can never join this one.

Tests may kill (SIGKILL), stop (SIGSTOP) and resume (SIGCONT) members, and restart them on their
data dir. The `etcd_prefix` fixture gives each test a key prefix of its own and heals the cluster
afterwards (resumes stopped members, restarts dead ones, waits until every member is healthy), so
one test's damage never leaks into the next.

Without the binary, tests that use the cluster skip locally with the reason, and fail when CI is
set.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.helpers import wait_until

SIZE = 3
START_TIMEOUT = 30.0  # a loopback cluster is healthy in 0.3-2.2 s on a loaded 2-core machine
EXIT_TIMEOUT = 10.0


def etcd_binary() -> str | None:
    """The etcd server binary to run, or None when the machine has none."""
    if os.access("/usr/bin/etcd", os.X_OK):
        return "/usr/bin/etcd"
    return shutil.which("etcd")


def _missing_service(reason: str) -> None:
    # The pattern of tests/conftest.py (imported from there it would be a circular import).
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _free_ports(count: int) -> list[int]:
    """Ports nobody listens on now; all sockets are held open together so no two are the same."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _get_json(url: str, timeout: float = 1.0, body: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=body, method="POST" if body else "GET")  # noqa: S310 - loopback URLs built here
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        return json.loads(response.read())


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def healthy(self) -> bool:
        try:
            answer = _get_json(f"{self.client_url}/health")
        except (OSError, ValueError):  # refused, timed out, 503 while it has no leader
            return False
        return bool(answer.get("health") == "true")


class EtcdCluster:
    """Three etcd members on loopback ports; see the module docstring."""

    def __init__(self, binary: str, root: Path, size: int = SIZE) -> None:
        self.binary = binary
        self.root = root
        self.token = f"chronoq-test-{uuid.uuid4().hex[:12]}"
        ports = _free_ports(2 * size)
        self.members = [
            Member(
                name=f"m{i}",
                client_port=ports[2 * i],
                peer_port=ports[2 * i + 1],
                data_dir=root / f"m{i}",
                log_path=root / f"m{i}.log",
            )
            for i in range(size)
        ]

    @property
    def endpoints(self) -> list[str]:
        return [member.client_url for member in self.members]

    def start(self) -> None:
        for i in range(len(self.members)):
            self._launch(i)
        self.wait_healthy()

    def kill(self, i: int) -> None:
        """SIGKILL member i and wait until it is gone."""
        member = self.members[i]
        if member.process is not None and member.running:
            member.process.send_signal(signal.SIGKILL)
            member.process.wait(EXIT_TIMEOUT)
        member.stopped = False
        self._close_log(member)

    def stop(self, i: int) -> None:
        """SIGSTOP member i: it keeps its sockets open and answers nothing (a hung server)."""
        member = self.members[i]
        assert member.process is not None and member.running, f"{member.name} is not running"
        member.process.send_signal(signal.SIGSTOP)
        member.stopped = True

    def cont(self, i: int) -> None:
        """SIGCONT member i after stop(i)."""
        member = self.members[i]
        if member.process is not None and member.running:
            member.process.send_signal(signal.SIGCONT)
        member.stopped = False

    def restart(self, i: int, wait_healthy: bool = True) -> None:
        """Start member i again on its data dir, once its old process has exited (else the new
        one could lose the race for the ports); with `wait_healthy`, wait until it serves."""
        self.kill(i)
        self._launch(i)
        if wait_healthy:
            self.wait_healthy([i])

    def rebuild(self, writes_before: int = 0) -> None:
        """Replace the cluster by a new one on the same ports: every member killed, its data
        gone, started again under a new cluster token. Leases, keys and revisions start over,
        as after an etcd rebuilt from nothing or replaced by another. `writes_before`
        unrelated writes first raise the old cluster's revision, so that the new one's epochs
        are surely below those already recorded elsewhere."""
        for n in range(writes_before):
            body = json.dumps({"key": _b64(f"scratch/{n}".encode()), "value": _b64(b"x")})
            _get_json(
                f"{self.members[n % len(self.members)].client_url}/v3/kv/put", 2.0, body.encode()
            )
        for i in range(len(self.members)):
            self.kill(i)
        for member in self.members:
            shutil.rmtree(member.data_dir, ignore_errors=True)
        self.token = f"chronoq-test-{uuid.uuid4().hex[:12]}"
        self.start()

    def leader_index(self) -> int:
        """The member that is the raft leader now."""
        for i, member in enumerate(self.members):
            if not member.running or member.stopped:
                continue
            status = _get_json(f"{member.client_url}/v3/maintenance/status", body=b"{}")
            if status["leader"] == status["header"]["member_id"]:
                return i
        raise AssertionError("no etcd member says it is the raft leader")

    def follower_index(self) -> int:
        """A running member that is not the raft leader."""
        leader = self.leader_index()
        return next(i for i, m in enumerate(self.members) if i != leader and m.running)

    def wait_healthy(self, indexes: list[int] | None = None) -> None:
        chosen = [self.members[i] for i in indexes] if indexes is not None else self.members
        for member in chosen:
            wait_until(
                member.healthy, timeout=START_TIMEOUT, what=f"etcd {member.name} to be healthy"
            )

    def heal(self) -> None:
        """Resume stopped members, restart dead ones, and wait until all are healthy."""
        for i, member in enumerate(self.members):
            if member.stopped:
                self.cont(i)
            if not member.running:
                self._launch(i)
        self.wait_healthy()

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under `prefix` (best effort: the cluster may be unhealthy)."""
        start = prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1])
        body = json.dumps({"key": _b64(start), "range_end": _b64(end)}).encode()
        for member in self.members:
            with contextlib.suppress(OSError, ValueError):
                _get_json(f"{member.client_url}/v3/kv/deleterange", timeout=2.0, body=body)
                return

    def close(self) -> None:
        """Kill every member (a graceful stop hands raft leadership over first, which only
        costs time here) and remove the data dirs."""
        for i in range(len(self.members)):
            self.kill(i)
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, i: int, lines: int = 20) -> str:
        text = self.members[i].log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _launch(self, i: int) -> None:
        member = self.members[i]
        member.data_dir.mkdir(parents=True, exist_ok=True)
        self._close_log(member)
        member._log = member.log_path.open("ab")
        member.process = subprocess.Popen(
            self._command(member), stdout=member._log, stderr=subprocess.STDOUT, env=_clean_env()
        )
        member.stopped = False

    def _command(self, member: Member) -> list[str]:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        return [
            self.binary,
            *("--name", member.name, "--data-dir", str(member.data_dir)),
            *("--listen-client-urls", member.client_url),
            *("--advertise-client-urls", member.client_url),
            *("--listen-peer-urls", member.peer_url),
            *("--initial-advertise-peer-urls", member.peer_url),
            *("--initial-cluster", initial, "--initial-cluster-state", "new"),
            *("--initial-cluster-token", self.token),
            *("--heartbeat-interval", "100", "--election-timeout", "1000"),
            *("--logger", "zap", "--log-outputs", "stderr"),
        ]

    @staticmethod
    def _close_log(member: Member) -> None:
        if member._log is not None:
            member._log.close()
            member._log = None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _clean_env() -> dict[str, str]:
    """This environment without ETCD_* variables, which etcd would read as flags."""
    return {name: value for name, value in os.environ.items() if not name.startswith("ETCD")}


@pytest.fixture(scope="session")
def etcd_cluster() -> Iterator[EtcdCluster]:
    """A healthy 3-member etcd cluster for the whole test run."""
    binary = etcd_binary()
    if binary is None:
        _missing_service(
            "etcd is not installed (/usr/bin/etcd, or etcd on PATH; Debian: etcd-server)"
        )
    assert binary is not None
    cluster = EtcdCluster(binary, Path(tempfile.mkdtemp(prefix="chronoq-etcd-")))
    try:
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    yield cluster
    cluster.close()


@pytest.fixture
def etcd_prefix(etcd_cluster: EtcdCluster) -> Iterator[str]:
    """A key prefix of this test's own; afterwards the cluster is healed and the prefix emptied."""
    prefix = f"chronoq-test/{uuid.uuid4().hex[:10]}"
    yield prefix
    etcd_cluster.heal()
    etcd_cluster.delete_prefix(prefix + "/")
