"""An elector without a coordination service, for tests: leadership is what you say.

```python
StaticElector()                                 # "static" leads partition 0 (a scheduler's)
StaticElector(leader=False)                     # ... or never does
a = StaticElector("a", partitions=4)            # leads 0-3 at epoch 1, trusted forever
b = StaticElector("b", partitions=4, led=[])    # leads nothing
a.move_to(b, [2, 3])                            # a: {0, 1}; b: {2, 3} at epoch 2
a.bump_epoch([0])                               # a re-elected for 0 under epoch 3
a.set_led([0, 1, 2])                            # 2 is led again, under a new epoch
```

Epochs behave as etcd's do: a leadership that starts (a partition newly led, a move, a bump) gets
an epoch above every epoch this elector has used, and `move_to` also goes above the receiver's,
so the new leader of a moved partition always has the higher epoch. Trust never ends
(`trusted_until` is infinity). Nothing is shared between instances but what `move_to` hands over.

It is also `chronoq.testing.StaticElector`, whose first form (`StaticElector(leader=False,
holder="static")`) runs a `chronoq.Scheduler` without an election: `leader` says whether it leads
every partition or none, and can be changed on a live elector.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from chronoq.coordination.base import Leadership, LeaderTerm, PartitionLeader, check_partitions
from chronoq.coordination.legacy import TermMethods
from chronoq.errors import ConfigError

__all__ = ["StaticElector"]


class StaticElector(TermMethods):
    """`PartitionElector` that leads the partitions it is told (all by default) forever."""

    def __init__(
        self,
        holder: str = "static",
        partitions: int = 1,
        led: Iterable[int] | None = None,
        epoch: int = 1,
        *,
        leader: bool = True,
    ) -> None:
        if isinstance(holder, bool):  # the test kit's first form: StaticElector(False)
            _warn_positional_leader()
            holder, leader = "static", holder
        check_partitions(partitions)
        _check_epoch(epoch)
        if not leader and led is not None:
            raise ConfigError("give either led= or leader=False, not both")
        self.holder = holder
        self.partitions = partitions
        chosen = range(partitions) if led is None else self._checked(led)
        self._epochs: dict[int, int] = dict.fromkeys(chosen if leader else (), epoch)
        self._last_epoch = epoch
        self._since = datetime.now(UTC)
        self._closed = False
        self._lock = threading.Lock()

    # The port

    def step(self) -> dict[int, Leadership]:
        with self._lock:
            return {
                partition: Leadership(partition, epoch, math.inf)
                for partition, epoch in sorted(self._epochs.items())
            }

    def leaders(self) -> list[PartitionLeader]:
        with self._lock:
            return [
                PartitionLeader(partition, self.holder, epoch)
                for partition, epoch in sorted(self._epochs.items())
            ]

    def members(self) -> list[str]:
        return [] if self._closed else [self.holder]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._epochs.clear()

    # Moving leadership in tests

    @property
    def leader(self) -> bool:
        """Whether it leads anything; set it to lead every partition (True) or none (False)."""
        with self._lock:
            return bool(self._epochs)

    @leader.setter
    def leader(self, leading: bool) -> None:
        self.set_led(range(self.partitions) if leading else [])

    @property
    def epochs(self) -> dict[int, int]:
        """The partitions led now and their epochs."""
        with self._lock:
            return dict(sorted(self._epochs.items()))

    def set_led(self, partitions: Iterable[int], epoch: int | None = None) -> None:
        """Lead exactly `partitions` from now on: those already led keep their epoch, the others
        start a leadership under `epoch` (default: one above any epoch used so far)."""
        chosen = self._checked(partitions)
        with self._lock:
            self._ensure_open()
            kept = {p: e for p, e in self._epochs.items() if p in chosen}
            self._epochs = kept | dict.fromkeys(chosen - kept.keys(), self._new_epoch(epoch))

    def bump_epoch(self, partitions: Iterable[int] | None = None, epoch: int | None = None) -> int:
        """Start a new term for `partitions` (default: every partition led), as if this holder
        had lost and won them again; returns the new epoch."""
        with self._lock:
            self._ensure_open()
            chosen = set(self._epochs) if partitions is None else self._checked(partitions)
            unled = chosen - self._epochs.keys()
            if unled:
                raise ValueError(f"{self.holder} does not lead partitions {sorted(unled)}")
            new = self._new_epoch(epoch)
            self._epochs.update(dict.fromkeys(chosen, new))
            return new

    def move_to(self, other: StaticElector, partitions: Iterable[int]) -> int:
        """Hand `partitions` over to `other` under an epoch above both electors' (as a change of
        leader in etcd would); returns that epoch."""
        chosen = self._checked(partitions)
        if other is self:
            raise ValueError("an elector cannot move partitions to itself")
        if other.partitions != self.partitions:
            raise ValueError("both electors must have the same number of partitions")
        with self._lock:
            self._ensure_open()
            unled = chosen - self._epochs.keys()
            if unled:
                raise ValueError(f"{self.holder} does not lead partitions {sorted(unled)}")
            for partition in chosen:
                del self._epochs[partition]
            epoch = max(self._last_epoch, other._last_epoch) + 1
            self._last_epoch = epoch
        with other._lock:
            other._ensure_open()
            other._last_epoch = max(other._last_epoch, epoch)
            other._epochs.update(dict.fromkeys(chosen, epoch))
        return epoch

    # The deprecated attempt()/resign() (TermMethods)

    def _term_of(self, lead: Leadership) -> LeaderTerm:
        now = datetime.now(UTC)
        return LeaderTerm("scheduler", self.holder, lead.epoch, self._since, now, now + _DAY)

    def _release(self) -> None:
        with self._lock:
            self._epochs.clear()

    def _new_epoch(self, epoch: int | None) -> int:
        if epoch is None:
            epoch = self._last_epoch + 1
        _check_epoch(epoch)
        self._last_epoch = max(self._last_epoch, epoch)
        return epoch

    def _checked(self, partitions: Iterable[int]) -> set[int]:
        chosen = set(partitions)
        if any(isinstance(p, bool) or not isinstance(p, int) for p in chosen):
            raise ConfigError(f"partitions must be whole numbers, got {sorted(chosen, key=repr)}")
        wrong = sorted(p for p in chosen if not 0 <= p < self.partitions)
        if wrong:
            raise ConfigError(
                f"partitions {wrong} are out of range: there are {self.partitions} (0 to"
                f" {self.partitions - 1})"
            )
        return chosen

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the elector of {self.holder} is closed")


_DAY = timedelta(days=1)  # what the deprecated attempt() reports as its term's expiry


def _warn_positional_leader() -> None:
    warnings.warn(
        "StaticElector(False) is deprecated: name it, StaticElector(leader=False)",
        DeprecationWarning,
        stacklevel=3,
    )


def _check_epoch(epoch: int) -> None:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise ConfigError(f"epoch must be a whole number of at least 1, got {epoch!r}")
