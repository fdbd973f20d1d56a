"""The single-duty elector shape that came before the port, and both ways across.

```
 old shape: attempt() -> LeaderTerm | None · resign() · close() · holder
   ├── TermElector    an old-shape elector given to Scheduler(elector=...), seen as a port
   │                  elector of one partition (it warns: the old shape is deprecated)
   └── TermMethods    attempt() and resign() on the port's own single-duty electors (static,
                      PostgreSQL, SQLite), so code written against the old shape still runs
```
"""

from __future__ import annotations

import time
import warnings
from abc import abstractmethod
from typing import Protocol

from chronoq.coordination.base import (
    Leadership,
    LeaderTerm,
    PartitionElector,
    PartitionLeader,
    check_ttl,
)

__all__ = [
    "LeaderElector",
    "TermElector",
    "TermMethods",
    "as_partition_elector",
    "warn_leader_elector",
]


class LeaderElector(Protocol):
    """Deprecated: elects one holder of a duty; implement `PartitionElector` instead.

    `attempt()` is called again and again by every candidate: it takes the duty when nobody
    holds it, renews it for its holder, and returns the term held, or None when another holds
    it or the store cannot confirm ours (step down at once: the leader must be sure).
    """

    holder: str

    def attempt(self) -> LeaderTerm | None: ...

    def resign(self) -> None: ...

    def close(self) -> None: ...


def as_partition_elector(elector: object, ttl: float) -> PartitionElector:
    """`elector` as a port elector: itself when it has `step()`, else (an old-shape elector)
    wrapped in `TermElector`, with a DeprecationWarning."""
    if callable(getattr(elector, "step", None)):
        return elector  # type: ignore[return-value]
    if not callable(getattr(elector, "attempt", None)):
        raise TypeError(f"an elector needs step() (PartitionElector), got {elector!r}")
    warnings.warn(
        "an elector with attempt()/resign() is deprecated: implement"
        " chronoq.coordination.PartitionElector (step(), leaders(), members(), close())",
        DeprecationWarning,
        stacklevel=3,
    )
    return TermElector(elector, ttl)  # type: ignore[arg-type]


class TermElector:
    """An old-shape elector as a `PartitionElector` of one partition: a term is partition 0's
    leadership under the term's number, trusted for half of `ttl` after the attempt was sent
    (the scheduler's rule for such electors before the port)."""

    partitions = 1

    def __init__(self, elector: LeaderElector, ttl: float) -> None:
        check_ttl(ttl)
        self.holder = elector.holder
        self.ttl = ttl
        self._elector = elector
        self._term: LeaderTerm | None = None

    def step(self) -> dict[int, Leadership]:
        sent_at = time.monotonic()
        self._term = term = self._elector.attempt()
        if term is None:
            return {}
        return {0: Leadership(0, term.term, sent_at + self.ttl / 2)}

    def leaders(self) -> list[PartitionLeader]:
        term = self._term
        if term is None:
            return []
        return [
            PartitionLeader(
                0, term.holder, term.term, term.elected_at, term.renewed_at, term.expires_at
            )
        ]

    def members(self) -> list[str]:
        return [self.holder]

    def close(self) -> None:
        self._term = None
        self._elector.close()


class TermMethods:
    """The old shape's `attempt()` and `resign()` on a port elector: partition 0's leadership
    as a `LeaderTerm`. Both are deprecated; `step()` and `close()` replace them."""

    def attempt(self) -> LeaderTerm | None:
        """Deprecated: `step()`, and partition 0 of what it returns."""
        _deprecated("attempt()", "step()")
        lead = self.step().get(0)
        return None if lead is None else self._term_of(lead)

    def resign(self) -> None:
        """Deprecated: `close()` (which also ends the elector)."""
        _deprecated("resign()", "close()")
        self._release()

    @abstractmethod
    def step(self) -> dict[int, Leadership]: ...

    @abstractmethod
    def _term_of(self, lead: Leadership) -> LeaderTerm:
        """The term behind a leadership this elector's last step returned."""

    @abstractmethod
    def _release(self) -> None:
        """Give up every partition and stay a candidate (the old `resign()`)."""


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"elector.{old} is deprecated: use {new} (chronoq.coordination.PartitionElector)",
        DeprecationWarning,
        stacklevel=3,
    )


def warn_leader_elector() -> None:
    """`store.leader_elector(...)` is deprecated for `store.elector(...)`."""
    warnings.warn(
        "store.leader_elector(duty, holder, ttl) is deprecated: use store.elector(duty, holder,"
        " ttl), a chronoq.coordination.PartitionElector",
        DeprecationWarning,
        stacklevel=3,
    )
