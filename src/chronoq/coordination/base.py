"""The partition elector port.

Every scheduler process of a tiered app runs one `PartitionElector`. `step()` is called again and
again: it renews what the process holds, campaigns for its fair share of the partitions, gives up
what it holds beyond that share, and returns the partitions it leads *and may act for now*.

A `Leadership` is trusted until `trusted_until` (monotonic seconds of this process): a leader acts
for a partition only before that instant, which ends before its lease in the coordination service
can expire, so a successor is never elected while this process still believes it leads. Where a
paused process acts anyway, its `epoch` fences it: the epoch of a leadership only grows, and every
write to Redis for the partition carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Leadership:
    """This process leads `partition`; `epoch` names the term (it grows at each new leader)."""

    partition: int
    epoch: int
    trusted_until: float  # time.monotonic() of this process


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """Who leads a partition, as the coordination service says (for status pages)."""

    partition: int
    holder: str
    epoch: int


class PartitionElector(Protocol):
    holder: str
    partitions: int

    def step(self) -> dict[int, Leadership]:
        """Renew, campaign and rebalance; the partitions led and trusted now, by number.
        Raises nothing for an unreachable coordination service: it returns {} (step down)."""
        ...

    def leaders(self) -> list[PartitionLeader]:
        """Every partition with a leader right now, in partition order."""
        ...

    def members(self) -> list[str]:
        """The holders of the live scheduler processes, sorted."""
        ...

    def close(self) -> None:
        """Resign every partition at once (successors need not wait for a lease to expire)."""
        ...
