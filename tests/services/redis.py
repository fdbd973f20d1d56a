"""Redis for tests: the running server, a fresh key prefix per test, and a private server.

- `redis_url`: the server at CHRONOQ_TEST_REDIS_URL (default redis://127.0.0.1:6379/9). When it
  cannot be reached the test skips with the reason, or fails when CI is set.
- `redis_prefix`: a key prefix of its own for each test (`chronoq-test-<8 hex>`); its keys are
  deleted afterwards, so tests share the server without seeing each other.
- `redis_client`: a client of `redis_url` from `chronoq.tier.redis.connect`, closed after.
- `private_redis`: a `redis-server` of the test's own on a free loopback port, without
  persistence (`--save "" --appendonly no`), in a temp dir; `restart()` kills it and starts it
  again, empty, on the same port, as a crashed Redis without persistence comes back. For the
  tests that flush, restart or stop Redis.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from chronoq.errors import StoreError
from chronoq.tier.redis import connect
from tests.helpers import wait_until

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/9"
_START_TIMEOUT = 10.0


def _missing_service(reason: str) -> None:
    from tests.conftest import _missing_service as missing  # one rule for every service

    missing(reason)


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("CHRONOQ_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    try:
        connect(url).close()
    except StoreError as exc:
        _missing_service(f"{exc} (set CHRONOQ_TEST_REDIS_URL)")
    return url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"chronoq-test-{uuid.uuid4().hex[:8]}"
    yield prefix
    client = connect(redis_url)
    try:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = connect(redis_url)
    yield client
    client.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateRedis:
    """A redis-server of one test, without persistence: a restart comes back empty."""

    def __init__(self, binary: str, directory: Path, password: str | None = None) -> None:
        self.binary = binary
        self.directory = directory
        self.password = password  # --requirepass, when given
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = self.directory / "redis.log"
        self.process = subprocess.Popen(
            [
                self.binary,
                *("--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
                *("--dir", str(self.directory), "--logfile", str(log)),
                *(("--requirepass", self.password) if self.password else ()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, timeout=_START_TIMEOUT, what=f"redis-server on {self.port}")

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            tail = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"redis-server exited with {self.process.returncode}:\n{tail}")
        try:
            probe = redis.Redis(
                port=self.port, password=self.password, socket_connect_timeout=1, socket_timeout=1
            )
            try:
                return bool(probe.ping())
            finally:
                probe.close()
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """Kill it (SIGKILL: no chance to save anything) and wait for it to exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=_START_TIMEOUT)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        _missing_service("redis-server is not on PATH (Debian package redis-server)")
        raise AssertionError("unreachable")  # _missing_service skips or fails
    server = PrivateRedis(binary, tmp_path)
    server.start()
    yield server
    server.stop()
