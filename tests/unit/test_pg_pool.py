"""The PostgreSQL store's pool tries to reconnect at most RECONNECT_MAX_DELAY apart, against the
installed psycopg_pool (whose own backoff doubles without a cap short of its reconnect_timeout):
if a psycopg_pool release changes what `ReconnectingPool` reaches into, this fails."""

from __future__ import annotations

import socket
import time
from typing import Any, ClassVar

import psycopg
import pytest
from psycopg_pool.base import AttemptWithBackoff

from chronoq.storage.postgres import pool
from tests.helpers import wait_until


class Recorded(psycopg.Connection[Any]):
    """Records when each connection attempt is made."""

    attempts: ClassVar[list[float]] = []

    @classmethod
    def connect(cls, *args: Any, **kwargs: Any) -> Any:
        cls.attempts.append(time.monotonic())
        return super().connect(*args, **kwargs)


def refused_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_reconnection_attempts_stop_spreading_out_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real schedule, scaled down 50 times: attempts 20 ms, 40 ms, 80 ms ... apart, capped
    # at 160 ms (the real one: 1 s, 2 s, 4 s ..., capped at RECONNECT_MAX_DELAY, 3 s).
    monkeypatch.setattr(AttemptWithBackoff, "INITIAL_DELAY", 0.02)
    monkeypatch.setattr(pool, "RECONNECT_MAX_DELAY", 0.16)
    monkeypatch.setattr(Recorded, "attempts", [])
    reconnecting = pool.ReconnectingPool(
        f"postgresql://postgres@127.0.0.1:{refused_port()}/none?connect_timeout=2",
        min_size=1,
        open=False,
        connection_class=Recorded,  # type: ignore[arg-type]
    )
    reconnecting.open(wait=False)
    try:
        # Uncapped, the 12th attempt would come 20 ms x (2**11 - 1), 41 s, after the first.
        wait_until(lambda: len(Recorded.attempts) >= 12, timeout=10, what="12 attempts")
    finally:
        reconnecting.close()
    gaps = [b - a for a, b in zip(Recorded.attempts, Recorded.attempts[1:], strict=False)]
    assert max(gaps[3:11]) < 0.16 + 0.5  # the cap, and room for a loaded machine
    assert min(gaps[3:11]) >= 0.08 * 0.9  # never less than half the cap: no busy loop
