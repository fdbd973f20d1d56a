"""The leadership port: `PartitionElector`, and what it hands out and reports.

A duty is an election over `partitions` partitions (the scheduler's duty has one, partition 0;
tiered dispatch's has one per partition of the tier). Every candidate process runs one elector
per duty and calls `step()` again and again: it renews what the process holds, campaigns for
what it may take, gives up what it should not keep, and returns the partitions it leads *and may
act for now*.

A `Leadership` is trusted until `trusted_until` (monotonic seconds of this process): a leader acts
for a partition only before that instant, which ends before its lease (or lock row) in the
coordination service can expire, so a successor is never elected while this process still
believes it leads. Where a paused process acts anyway, its `epoch` fences it: the epoch of a
partition only grows, strictly at each change of leader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from chronoq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Leadership:
    """This process leads `partition`; `epoch` names the term (it grows at each new leader)."""

    partition: int
    epoch: int
    trusted_until: float  # time.monotonic() of this process


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """Who leads a partition, as the coordination service says (for status pages). The times
    are those the service records (PostgreSQL and SQLite do, in `chronoq_leaders`), else None."""

    partition: int
    holder: str
    epoch: int
    elected_at: datetime | None = None
    renewed_at: datetime | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LeaderTerm:
    """Who holds a duty: `term` grows by one at every change of holder. What
    `chronoq_leaders` records of a term, and what `LeaderChanged` says of a new one."""

    duty: str
    holder: str
    term: int
    elected_at: datetime
    renewed_at: datetime
    expires_at: datetime


class PartitionElector(Protocol):
    holder: str
    partitions: int

    def step(self) -> dict[int, Leadership]:
        """Renew, campaign and rebalance; the partitions led and trusted now, by number.
        Raises nothing for an unreachable coordination service: it returns {} (step down).
        Leaderships returned by an earlier step end when this one is called."""
        ...

    def leaders(self) -> list[PartitionLeader]:
        """Every partition with a leader right now, in partition order. Raises
        `CoordinationUnavailable` when the service cannot be read."""
        ...

    def members(self) -> list[str]:
        """The holders of the live candidates this elector can see, sorted."""
        ...

    def close(self) -> None:
        """Resign every partition at once (successors need not wait for a lease to expire).
        Idempotent; `step()` returns {} from now on."""
        ...


def check_partitions(partitions: int) -> None:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigError(f"partitions must be a whole number of at least 1, got {partitions!r}")


def check_ttl(ttl: float) -> None:
    valid = isinstance(ttl, int | float) and not isinstance(ttl, bool)
    if not valid or not math.isfinite(ttl) or ttl <= 0:
        raise ConfigError(f"ttl must be a positive number of seconds, got {ttl!r}")


def check_name(what: str, name: str) -> None:
    """Holders and duties name keys and records: printable, and without '/', which separates
    a duty from its partition in `record_key`."""
    if not isinstance(name, str) or not name or "/" in name or not name.isprintable():
        raise ConfigError(f"{what} must be a non-empty name without '/', got {name!r}")
