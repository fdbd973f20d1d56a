"""The database clock, as a partition leader estimates it between round trips.

Every time decision of chronoq is made on the database clock; a leader must also know *now* on
that clock between its queries, to say which timers are due when it runs the move. Each staging
query returns the database's `clock_timestamp()`; the leader pins it to the midpoint of the
round trip on its own monotonic clock and reads the estimate off that clock until the next
query. The error is at most half a round trip plus the drift since, a few milliseconds: a timer
moved that early is refused by the claim (`run_at <= now` on the database) and the worker asks
again at its `run_at`, so an error costs lateness, never an early run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def due_ms(moment: datetime) -> int:
    """`moment` in whole milliseconds since the epoch, rounded up: a timer never fires before
    its job is due. A moment before 1970 is 0: a score cannot be negative, and a job due then
    is simply due now."""
    micros = (moment - EPOCH) // _MICROSECOND
    return max(0, -(-micros // 1000))


class DbClock:
    """`now_ms()` estimates the database clock; `deadline(ms)` is when, on the local monotonic
    clock, the database clock reaches `ms`."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._offset: float | None = None  # database seconds since the epoch minus monotonic

    @property
    def known(self) -> bool:
        return self._offset is not None

    def observe(self, db_now: datetime, sent: float, received: float) -> None:
        """A query sent at monotonic `sent` and answered at `received` read `db_now`."""
        self._offset = (db_now - EPOCH) / timedelta(seconds=1) - (sent + received) / 2

    def now_ms(self) -> int:
        return int((self._monotonic() + self._require()) * 1000)

    def deadline(self, ms: int) -> float:
        return ms / 1000 - self._require()

    def _require(self) -> float:
        if self._offset is None:
            raise RuntimeError("the database clock has not been read yet")
        return self._offset
