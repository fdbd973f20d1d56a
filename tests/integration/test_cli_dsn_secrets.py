"""The command's error line for a DSN it cannot use shows no piece of a secret."""

from __future__ import annotations

import socket

import pytest

from tests.integration.cli_support import run_cli

SECRET = "S3cretPW4hunter"


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pieces(secret: str, size: int = 4) -> list[str]:
    return [secret[at : at + size] for at in range(len(secret) - size + 1)]


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres@127.0.0.1:{port}/db?sslpassword={secret}",
        "postgresql://postgres:{head}@{tail}@127.0.0.1:{port}/db",
        "postgresql://postgres@127.0.0.1:{port}/db?password={secret}&sslmode=disable",
    ],
)
def test_the_error_line_shows_no_piece_of_the_password(dsn: str) -> None:
    filled = dsn.format(port=_closed_port(), secret=SECRET, head=SECRET[:6], tail=SECRET[6:])
    result = run_cli("jobs", "list", "--dsn", filled)
    assert result.code != 0
    said = result.out + result.err
    assert said.strip(), "the command should say why it failed"
    assert "Traceback" not in said
    leaked = [piece for piece in _pieces(SECRET) if piece in said]
    assert not leaked, said
