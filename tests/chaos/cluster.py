"""A PostgreSQL cluster of the chaos suite's own, in a temporary folder, so that restarting it
(fast or immediate shutdown) or killing its backends harms nothing else on the machine.

It is built from the installed server binaries (Debian's postgresql-NN package) with `initdb`,
run as the `postgres` user when we are root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

from tests.helpers import wait_until

BIN_ROOT = Path("/usr/lib/postgresql")


class ClusterUnavailable(Exception):
    """The machine cannot run a private PostgreSQL cluster (no binaries, no postgres user)."""


def _bin_dir() -> Path:
    versions = sorted(BIN_ROOT.glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not versions:
        raise ClusterUnavailable(f"no PostgreSQL server binaries under {BIN_ROOT}")
    return versions[-1].parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateCluster:
    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="chronoq-chaos-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            if shutil.which("runuser") is None:
                raise ClusterUnavailable("running as root without runuser to become postgres")
            shutil.chown(self.root, "postgres", "postgres")

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise ClusterUnavailable(f"{argv[0]} failed: {result.stderr.strip()[:500]}")

    def create(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        settings = (
            f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
            "fsync = on\nsynchronous_commit = on\nmax_connections = 200\n"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(settings)
        self.start()

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")
        wait_until(self.ready, timeout=30, what="the chaos cluster to accept connections")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str) -> None:
        """Stop with `mode` ("fast": disconnect everyone and shut down cleanly; "immediate":
        abort without a checkpoint, as a crash would, so startup replays the WAL), then start."""
        self.stop(mode)
        self.start()

    def ready(self) -> bool:
        try:
            psycopg.connect(self.dsn, connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def destroy(self) -> None:
        with contextlib.suppress(ClusterUnavailable):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
