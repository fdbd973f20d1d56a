"""A real dashboard server and a real worker on background threads, for the browser tests."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from tests.helpers import wait_until

CHROMIUM = Path("/usr/bin/chromium")
# Debian's Chromium, headless; nothing it does may reach the network but the test server.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip without Debian's Chromium, except under CI, where it must be installed."""
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} not found (Debian's chromium package; .ci/run installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@contextmanager
def serving(server: FastAPI) -> Iterator[str]:
    """Serve `server` with uvicorn on a free loopback port; yields its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # No lifespan, no websockets: the dashboard needs neither, and importing the websockets
    # library would only add its deprecation warnings to a suite that treats them as errors.
    config = uvicorn.Config(server, lifespan="off", ws="none", http="h11", log_level="warning")
    runner = uvicorn.Server(config)
    thread = threading.Thread(
        target=runner.run, kwargs={"sockets": [listener]}, name="test-uvicorn", daemon=True
    )
    thread.start()
    try:
        _wait_started(runner, thread)
        yield f"http://127.0.0.1:{port}"
    finally:
        runner.should_exit = True
        thread.join(timeout=15)
        listener.close()
        assert not thread.is_alive(), "uvicorn did not stop"


def _wait_started(runner: uvicorn.Server, thread: threading.Thread) -> None:
    wait_until(lambda: runner.started or not thread.is_alive(), timeout=15, what="uvicorn")
    assert runner.started, "uvicorn stopped before it started serving"
