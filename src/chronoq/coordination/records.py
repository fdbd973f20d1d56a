"""What the PostgreSQL and SQLite electors share: one lock per (duty, partition), and a row in
`chronoq_leaders` per lock recording its term.

```
 record key:  "scheduler"        partition 0 of duty "scheduler"  (the name the row had before
              "tier/3"           partition 3 of duty "tier"        partitions, so a process of
                                                                   an older release and a newer
                                                                   one contend for one lock)
 step():  for each partition: claim (take the lock if free, renew its row) ──► term N
            │ the store cannot confirm one of them: return {} (step down at once)
            └─ trusted until  sent + ttl/2   (the row expires at  written + ttl)
```

A step claims every partition it can: the first candidate to ask leads them all, the others
stand by, and a standby takes over each partition whose leader's lock is freed (PostgreSQL) or
whose row expired (SQLite). No fair share: that needs to know the standbys, which these stores
do not record, and the duties elected here (the scheduler's) have one partition.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Sequence
from typing import Protocol

from chronoq.coordination.base import (
    Leadership,
    LeaderTerm,
    PartitionLeader,
    check_name,
    check_partitions,
    check_ttl,
)
from chronoq.coordination.legacy import TermMethods
from chronoq.errors import ChronoqError, ConfigError, CoordinationUnavailable


class NotConfirmed(Exception):
    """The store could not confirm a claim: whatever this elector held, it may hold no more."""


class LeaderRecords(Protocol):
    def leader_list(self, duties: Sequence[str]) -> list[LeaderTerm]: ...


def record_key(duty: str, partition: int) -> str:
    """The lock's and the row's name: the duty itself for partition 0, `duty/N` otherwise."""
    return duty if partition == 0 else f"{duty}/{partition}"


class RecordedElector(TermMethods):
    """`PartitionElector` over a lock and a `chronoq_leaders` row per partition; a dialect
    supplies `_claim` and `_resign`."""

    def __init__(
        self, records: LeaderRecords, duty: str, holder: str, ttl: float, partitions: int
    ) -> None:
        check_name("duty", duty)
        if not isinstance(holder, str) or not holder:
            raise ConfigError(f"holder must be a non-empty name, got {holder!r}")
        check_ttl(ttl)
        check_partitions(partitions)
        self.duty = duty
        self.holder = holder
        self.ttl = float(ttl)
        self.partitions = partitions
        self._records = records
        self._keys = [record_key(duty, partition) for partition in range(partitions)]
        self._terms: dict[int, LeaderTerm] = {}  # what the last step led, as its rows say
        self._closed = False
        self._lock = threading.Lock()

    def step(self) -> dict[int, Leadership]:
        with self._lock:
            if self._closed:
                return {}
            sent_at = time.monotonic()
            try:
                self._terms = self._claim_all()
            except NotConfirmed:
                self._terms = {}
                return {}
            until = sent_at + self.ttl / 2
            if until <= time.monotonic():  # the step itself outlasted the trust window
                return {}
            return {p: Leadership(p, term.term, until) for p, term in self._terms.items()}

    def leaders(self) -> list[PartitionLeader]:
        partition_of = {key: partition for partition, key in enumerate(self._keys)}
        try:
            terms = self._records.leader_list(self._keys)
        except ChronoqError as exc:
            raise CoordinationUnavailable(f"the store cannot be read: {exc}") from None
        found = [(partition_of[term.duty], term) for term in terms]
        return [
            PartitionLeader(p, t.holder, t.term, t.elected_at, t.renewed_at, t.expires_at)
            for p, t in sorted(found, key=lambda pair: pair[0])
        ]

    def members(self) -> list[str]:
        """The holders leading a partition now, and this one while it is open: a standby
        leaves no record in these stores until it leads."""
        leading = {leader.holder for leader in self.leaders()}
        return sorted(leading | ({self.holder} if not self._closed else set()))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._resign_held()
            self._shut()

    # The dialect's part

    @abstractmethod
    def _claim(self, key: str) -> LeaderTerm | None:
        """Take or renew the lock named `key`: the term recorded, or None when another holds
        it. Raises `NotConfirmed` when the store cannot say (after dropping what it held)."""

    @abstractmethod
    def _resign(self, key: str, term: LeaderTerm) -> None:
        """Give the lock up and expire its row, by (holder, term); quietly, if the store fails
        (the lock goes with the session, the row expires on its own)."""

    def _shut(self) -> None:
        """Release what the elector opened (its connection), once closed."""

    # Helpers

    def _claim_all(self) -> dict[int, LeaderTerm]:
        terms: dict[int, LeaderTerm] = {}
        for partition, key in enumerate(self._keys):
            term = self._claim(key)
            if term is not None:
                terms[partition] = term
        return terms

    def _resign_held(self) -> None:
        held, self._terms = self._terms, {}
        for partition, term in sorted(held.items()):
            self._resign(self._keys[partition], term)

    # The deprecated attempt()/resign() (TermMethods)

    def _term_of(self, lead: Leadership) -> LeaderTerm:
        return self._terms[lead.partition]

    def _release(self) -> None:
        with self._lock:
            self._resign_held()
