"""`chronoq serve` under a bounded slow-client attack from this machine: clients that declare
huge bodies, send a little and stall, or drip their headers, are answered or cut off within the
deadlines, the server's memory stays flat, and a normal request is served meanwhile."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.integration.cli_support import Spawner, run_cli
from tests.integration.test_serve import TOKEN, _free_port, _get

CLIENTS = 10  # per kind of attack
DECLARED = 16_777_000
SENT = 64 * 1024  # of the declared body, before the client stalls
DEADLINE = 1.0  # the server's header and body timeouts in this test, in seconds
ANSWERED_WITHIN = 5.0  # the deadline, plus room for a loaded machine
RSS_GROWTH_BOUND = 20 * 1024 * 1024
# The attack comes from another loopback address than the normal request: its bad tokens use
# up its own budget of failed authentications, and must not throttle anybody else.
ATTACKER = ("127.0.0.2", 0)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _stall(port: int, head: bytes, body: bytes) -> socket.socket:
    """A client that sends `head` and `body`, then nothing more."""
    client = socket.create_connection(
        ("127.0.0.1", port), timeout=ANSWERED_WITHIN, source_address=ATTACKER
    )
    with contextlib.suppress(OSError):  # refused and closed before all was sent: as it should
        client.sendall(head + body)
    return client


def _post_head(path: str, length: int, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(client: socket.socket) -> tuple[bytes, float]:
    """The status line the server answered (b"" for none) and how long until it closed."""
    started, received = time.monotonic(), b""
    try:
        while chunk := client.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        client.close()
    return received.split(b"\r\n", 1)[0], time.monotonic() - started


def _serve(spawner: Spawner, url: str, app_spec: str, *options: str) -> Iterator[tuple[int, int]]:
    assert run_cli("migrate", "--dsn", url).code == 0
    port = _free_port()
    argv = ["--app", app_spec, "--dsn", url, "--port", str(port), *options]
    process = spawner.start("serve", *argv, env={"CHRONOQ_ADMIN_TOKENS": TOKEN})
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _get(f"{base}/api/v1/jobs", TOKEN)[0] == 200, 30, "the server to answer")
    yield port, process.pid
    process.send_signal(signal.SIGTERM)
    assert spawner.wait(process, 30) == 0
    assert "Traceback" not in spawner.log(process)


@pytest.fixture
def server(spawner: Spawner, url: str, app_spec: str) -> Iterator[tuple[int, int]]:
    timeout = f"{DEADLINE:g}s"
    yield from _serve(
        spawner, url, app_spec, "--header-timeout", timeout, "--body-timeout", timeout
    )


def test_slow_clients_neither_hold_memory_nor_connections(server: tuple[int, int]) -> None:
    port, pid = server
    before = _rss(pid)
    filler = b"x" * SENT
    bad_token = "Authorization: Bearer not-a-token-0123456789"
    attacks = {
        b"HTTP/1.1 413 Request Entity Too Large": [
            _stall(port, _post_head("/login", DECLARED), filler) for _ in range(CLIENTS)
        ],
        b"HTTP/1.1 401 Unauthorized": [
            _stall(port, _post_head("/api/v1/jobs", DECLARED, bad_token), filler)
            for _ in range(CLIENTS)
        ],
        b"HTTP/1.1 408 Request Timeout": [  # under the login form's limit: the deadline cuts it
            _stall(port, _post_head("/login", 8000), b"token=x") for _ in range(CLIENTS)
        ],
        b"": [  # headers begun, never finished
            _stall(port, b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"")
            for _ in range(CLIENTS)
        ],
    }
    try:
        assert _get(f"http://127.0.0.1:{port}/api/v1/jobs", TOKEN)[0] == 200  # served meanwhile
        during = _rss(pid)
        for expected, clients in attacks.items():
            for client in clients:
                status, took = _answer(client)
                assert status == expected
                assert took < ANSWERED_WITHIN
    finally:
        for client in (client for clients in attacks.values() for client in clients):
            client.close()
    grown = max(during, _rss(pid)) - before
    print(f"server RSS {before / 2**20:.1f} MiB before, grown by {grown / 2**20:.1f} MiB")
    assert grown < RSS_GROWTH_BOUND


@pytest.fixture
def capped_server(spawner: Spawner, url: str, app_spec: str) -> Iterator[tuple[int, int]]:
    yield from _serve(spawner, url, app_spec, "--max-connections", "3")


def test_past_the_connection_cap_requests_get_503(capped_server: tuple[int, int]) -> None:
    jobs = f"http://127.0.0.1:{capped_server[0]}/api/v1/jobs"
    idle = [socket.create_connection(("127.0.0.1", capped_server[0]), timeout=5) for _ in range(3)]
    try:
        wait_until(lambda: _get(jobs, TOKEN)[0] == 503, 10, "a request past the cap refused")
    finally:
        for client in idle:
            client.close()
    wait_until(lambda: _get(jobs, TOKEN)[0] == 200, 10, "the server to serve again")
