"""`chronoq serve` as a process: it serves the API, the dashboard and /metrics, refuses to open
an unauthenticated server beyond loopback, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.helpers import wait_until
from tests.integration.cli_support import Spawner, run_cli

TOKEN = "serve-admin-token-0123456789"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)  # noqa: S310 - loopback http only
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def _post(url: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST")  # noqa: S310
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        return response.status, json.loads(response.read())


def test_serve_answers_and_stops_on_sigterm(spawner: Spawner, url: str, app_spec: str) -> None:
    assert run_cli("migrate", "--dsn", url).code == 0
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    process = spawner.start(
        "serve",
        "--app",
        app_spec,
        "--dsn",
        url,
        "--port",
        str(port),
        env={"CHRONOQ_ADMIN_TOKENS": TOKEN},
    )
    wait_until(lambda: _get(f"{base}/api/v1/openapi.json")[0] == 200, 30, "the server to answer")
    assert _get(f"{base}/api/v1/jobs")[0] == 401
    status, created = _post(
        f"{base}/api/v1/jobs", {"task": "add", "payload": {"a": 1, "b": 2}}, TOKEN
    )
    assert (status, created["created"]) == (201, True)
    status, body = _get(f"{base}/api/v1/jobs/{created['id']}", TOKEN)
    assert (status, json.loads(body)["task"]) == (200, "add")
    assert _get(f"{base}/metrics")[0] == 401
    status, metrics = _get(f"{base}/metrics", TOKEN)
    assert status == 200
    assert b'chronoq_jobs_enqueued_total{queue="default",task="add"} 1.0' in metrics
    process.send_signal(signal.SIGTERM)
    assert spawner.wait(process, 30) == 0
    log = spawner.log(process)
    assert f"on http://127.0.0.1:{port}/" in log
    assert "Traceback" not in log


def test_serve_says_it_is_open_on_loopback(spawner: Spawner, url: str) -> None:
    assert run_cli("migrate", "--dsn", url).code == 0
    port = _free_port()
    process = spawner.start("serve", "--dsn", url, "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _get(f"{base}/api/v1/jobs")[0] == 200, 30, "the open server to answer")
    process.send_signal(signal.SIGTERM)
    assert spawner.wait(process, 30) == 0
    assert "no API token configured: open access" in spawner.log(process)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])  # noqa: S104 - refused
def test_serve_without_tokens_refuses_other_addresses(url: str, host: str) -> None:
    result = run_cli("serve", "--dsn", url, "--host", host)
    assert result.code == 2
    assert "no token is configured" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_serve_refuses_short_tokens(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_ADMIN_TOKENS", "short")
    result = run_cli("serve", "--dsn", url)
    assert result.code == 2
    assert "at least 16 characters" in result.err
    assert "short" not in result.err.replace("at least", "")


def test_serve_on_a_database_not_migrated_fails_in_one_line(tmp_path: Any) -> None:
    result = run_cli("serve", "--dsn", "postgresql://nobody:secret@127.0.0.1:1/none")
    assert result.code == 1
    assert "secret" not in result.err
    assert len(result.err.strip().splitlines()) == 1
