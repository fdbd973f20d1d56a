"""Private servers for figure 8: a PostgreSQL cluster, a redis-server and an etcd member, each on
a free loopback port and a temporary directory, started for the figure and stopped after it.

Figure 8 counts the database's statements and CPU with dozens of idle workers connected, and
kills partition leaders: on servers of its own, nothing else running on the machine is counted,
no shared server runs out of connections, and no other user's keys are touched.

```
 PostgreSQL  initdb + pg_ctl (as the `postgres` user when run as root), max_connections 400,
             pg_stat_statements preloaded; server CPU = the postmaster and all its children
 Redis       redis-server --save '' --appendonly no
 etcd        one member (leases and elections need no quorum of three here)
```
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import cpu

PG_BIN_ROOT = Path("/usr/lib/postgresql")
START_TIMEOUT = 30.0


class ServiceMissing(Exception):
    """A server binary figure 8 needs is not installed; the message names it."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin(name: str) -> Path:
    found = sorted(PG_BIN_ROOT.glob(f"*/bin/{name}"))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path is None:
        raise ServiceMissing(f"PostgreSQL's {name} is not installed")
    return Path(on_path)


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the `postgres` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _wait(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not start in {START_TIMEOUT:.0f}s")
        time.sleep(0.05)


@dataclass
class Postgres:
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def server_pids(self) -> list[int]:
        """The postmaster and every process it started (backends, writers, autovacuum)."""
        parent = self.postmaster_pid()
        return [parent, *cpu.children(parent)]

    def cpu_seconds(self) -> float:
        return cpu.processes_seconds(self.server_pids())


@contextlib.contextmanager
def postgres(track_planning: bool = False) -> Iterator[Postgres]:
    """The private cluster; `track_planning` has pg_stat_statements time each statement's
    planning too (plans, total_plan_time), at some cost to hot statements."""
    root = Path(tempfile.mkdtemp(prefix="chronoq-bench-pg-"))
    server = Postgres(root, free_port())
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    initdb = [str(_pg_bin("initdb")), "-D", str(server.data), "-A", "trust", "-U", "postgres"]
    subprocess.run(
        _as_postgres([*initdb, "--no-sync"]), check=True, capture_output=True, timeout=120
    )
    options = (
        f"-p {server.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} "
        "-c max_connections=400 -c shared_preload_libraries=pg_stat_statements "
        "-c pg_stat_statements.track=all"
        + (" -c pg_stat_statements.track_planning=on" if track_planning else "")
    )
    pg_ctl = str(_pg_bin("pg_ctl"))
    start = [pg_ctl, "-D", str(server.data), "-l", str(root / "log"), "-o", options, "-w"]
    subprocess.run(_as_postgres([*start, "start"]), check=True, capture_output=True, timeout=60)
    try:
        yield server
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(server.data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[str, int]]:
    """A redis-server without persistence; yields its URL (database 0) and its pid."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceMissing("redis-server is not installed")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    proc = subprocess.Popen(
        [*command, "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait(lambda: _listening(port), "redis-server")
        yield f"redis://127.0.0.1:{port}/0", proc.pid
    finally:
        end(proc)


@contextlib.contextmanager
def etcd_member() -> Iterator[str]:
    """One etcd member on loopback; yields its client URL."""
    binary = "/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else shutil.which("etcd")
    if binary is None:
        raise ServiceMissing("etcd is not installed")
    root = Path(tempfile.mkdtemp(prefix="chronoq-bench-etcd-"))
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    command = [
        binary,
        *("--name", "bench", "--data-dir", str(root / "data")),
        *("--listen-client-urls", client, "--advertise-client-urls", client),
        *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
        *("--initial-cluster", f"bench={peer}", "--initial-cluster-state", "new"),
        *("--heartbeat-interval", "100", "--election-timeout", "1000"),
    ]
    with (root / "log").open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: _healthy(client), "etcd")
        yield client
    finally:
        end(proc)
        shutil.rmtree(root, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1.0) as answer:  # noqa: S310 - loopback
            return b'"true"' in answer.read()
    except OSError:
        return False


def end(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
