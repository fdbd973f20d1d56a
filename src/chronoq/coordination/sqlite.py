"""SQLite leadership: a lock row per (duty, partition) with an expiry.

A row in `chronoq_leaders` is the lock: a candidate takes it when it is free or expired, its
holder renews it at every step, and a holder that stops renewing (it died) loses it when the
row expires, `ttl` seconds after its last renewal. There is no session to tie a lock to in an
embedded database, so the lease is the lock. The holder trusts it for half the ttl after the
step began, so it has stopped acting well before the row can expire and a successor take it.

A holder whose store cannot confirm steps down at once (`step()` returns {}). Since every
candidate shares one file on one host, their clocks agree and the row's expiry is safe to
compare against.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from chronoq.coordination.base import LeaderTerm
from chronoq.coordination.records import LeaderRecords, NotConfirmed, RecordedElector
from chronoq.errors import ChronoqError

__all__ = ["SqliteElector"]


class SqliteRecords(LeaderRecords, Protocol):
    def leader_attempt(self, duty: str, holder: str, ttl: float) -> LeaderTerm | None: ...

    def leader_forget(self, duty: str, holder: str, term: int) -> None: ...


class SqliteElector(RecordedElector):
    """`PartitionElector` on a lock row per partition of `duty`, in `store`'s file."""

    def __init__(
        self, store: SqliteRecords, duty: str, holder: str, ttl: float, partitions: int = 1
    ) -> None:
        super().__init__(store, duty, holder, ttl, partitions)
        self._store = store

    def _claim(self, key: str) -> LeaderTerm | None:
        try:
            return self._store.leader_attempt(key, self.holder, self.ttl)
        except ChronoqError:
            raise NotConfirmed from None

    def _resign(self, key: str, term: LeaderTerm) -> None:
        # When the row cannot be expired now it expires on its own.
        with contextlib.suppress(ChronoqError):
            self._store.leader_forget(key, self.holder, term.term)
