"""A partition elector without a coordination service, for tests: leadership is what you say.

```python
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
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from chronoq.coordination.base import Leadership, PartitionLeader
from chronoq.errors import ConfigError

__all__ = ["StaticElector"]


class StaticElector:
    """`PartitionElector` that leads the partitions it is told (all by default) forever."""

    def __init__(
        self, holder: str, partitions: int, led: Iterable[int] | None = None, epoch: int = 1
    ) -> None:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(
                f"partitions must be a whole number of at least 1, got {partitions!r}"
            )
        _check_epoch(epoch)
        self.holder = holder
        self.partitions = partitions
        chosen = range(partitions) if led is None else self._checked(led)
        self._epochs: dict[int, int] = dict.fromkeys(chosen, epoch)
        self._last_epoch = epoch
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


def _check_epoch(epoch: int) -> None:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise ConfigError(f"epoch must be a whole number of at least 1, got {epoch!r}")
