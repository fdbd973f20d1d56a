"""`chronoq serve` on a port it cannot listen on: one line and exit code 2, before any
"serving" line, as the worker's `--metrics-port` does."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from chronoq.cli.serve import listen
from chronoq.errors import ConfigError
from tests.integration.cli_support import Spawner, run_cli


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another socket is listening on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port: int = holder.getsockname()[1]
        yield port


def test_serve_on_a_busy_port_says_so_in_one_line(
    spawner: Spawner, busy_port: int, tmp_path: Path
) -> None:
    dsn = f"sqlite:///{tmp_path / 'serve.db'}"
    assert run_cli("migrate", "--dsn", dsn).code == 0
    process = spawner.start("serve", "--dsn", dsn, "--port", str(busy_port))
    assert spawner.wait(process, 30) == 2
    assert spawner.log(process).splitlines() == [
        f"error: cannot serve on 127.0.0.1:{busy_port}: Address already in use; "
        "choose another --port or --host"
    ]


def test_listen_binds_the_port_asked_for_or_a_free_one() -> None:
    with listen("127.0.0.1", 0) as picked:
        port = picked.getsockname()[1]
        assert port > 0
        with pytest.raises(ConfigError, match=f"cannot serve on 127.0.0.1:{port}: Address"):
            listen("127.0.0.1", port).close()


def test_listen_names_an_address_it_cannot_use() -> None:
    not_here = r"cannot serve on 192\.0\.2\.10:8080: .*; choose another --port or --host"
    with pytest.raises(ConfigError, match=not_here):
        listen("192.0.2.10", 8080).close()
