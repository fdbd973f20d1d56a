"""The fleet beacon outlives a store that fails: it logs the failure once and keeps beating."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from chronoq.errors import StoreUnavailable
from chronoq.fleet.beacon import Beacon
from chronoq.fleet.records import ProcessInfo
from tests.helpers import wait_until


class FailingStore:
    """A store that is unreachable, counting the beats tried."""

    def __init__(self) -> None:
        self.beats = 0

    def process_prune(self) -> None:
        raise StoreUnavailable

    def process_beat(self, params: Any) -> None:
        self.beats += 1
        raise StoreUnavailable

    def process_stop(self, process_id: str) -> None:
        raise StoreUnavailable


def test_a_failed_beat_is_logged_and_the_beacon_beats_on(caplog: pytest.LogCaptureFixture) -> None:
    store = FailingStore()
    info = ProcessInfo("vm:1:abc", "worker", "vm", 1, "0")
    beacon = Beacon(store, lambda: info, interval=0.01)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="chronoq.fleet"):
        beacon.start()
        try:
            wait_until(lambda: store.beats >= 3, timeout=10, what="three beats tried")
        finally:
            beacon.stop()
    failed = [r for r in caplog.records if getattr(r, "action", "") == "fleet.beat_failed"]
    assert len(failed) == 1
    assert failed[0].process_id == "vm:1:abc"
