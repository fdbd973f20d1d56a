"""The fleet registry's part of the store port: which processes run, and what they serve.

Its statements are in each dialect's `processes.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from chronoq.fleet.records import RECENT, Fleet, ProcessInfo


@dataclass(frozen=True, slots=True)
class ProcessBeatParams:
    """Record or refresh a process in the fleet registry; it counts as alive for `ttl`
    seconds from now on the database clock, unless it beats again or stops."""

    info: ProcessInfo
    ttl: float
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProcessListParams:
    """Live processes, or with `all` also those that stopped or stopped refreshing within
    `recent` (older records are left out, and pruned)."""

    all: bool = False
    recent: timedelta = RECENT
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProcessSessionsEndParams:
    """End the database sessions of the worker `worker_id`, whose process has died, and wait
    until the server has let go of them, at most `timeout` seconds. A statement of theirs that
    was still executing (a claim waiting for a lock, say) is rolled back instead of committing
    after its client is gone. The worker's sessions are those named after it: see
    `chronoq.storage.dsn.with_session_name`."""

    worker_id: str
    timeout: float = 5.0


class ProcessesPort(Protocol):
    """Records of the processes of the fleet, on the database clock."""

    def process_beat(self, params: ProcessBeatParams) -> None:
        """Record or refresh a process (see `ProcessBeatParams`)."""
        ...

    def process_stop(self, process_id: str, now: datetime | None = None) -> bool:
        """Mark a process stopped (it exited cleanly); False when no live record had that id."""
        ...

    def process_list(self, params: ProcessListParams) -> Fleet:
        """The processes, most recently seen first, read on the database clock."""
        ...

    def process_prune(self, recent: timedelta = RECENT) -> int:
        """Delete records that ended more than `recent` ago; the number deleted."""
        ...

    def process_sessions_end(self, params: ProcessSessionsEndParams) -> int:
        """End a dead worker's database sessions (see `ProcessSessionsEndParams`); how many
        were still open when the timeout ran out (0: none is left)."""
        ...
