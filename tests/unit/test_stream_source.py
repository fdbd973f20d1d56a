"""The stream job source of tiered dispatch (`StreamJobSource`) against an in-memory StreamReader
and a store whose answers each test sets: what it holds stays bounded while the database is away,
a claim that fails reaches the worker, busy rows are asked again with a growing wait, and the
reader thread outlives an unexpected error."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from chronoq.errors import StoreUnavailable
from chronoq.storage.base import IdClaim, JobClaimIdsParams
from chronoq.tier.ports import Delivery
from chronoq.tier.source import BUSY_RETRY, BUSY_RETRY_MAX, StreamJobSource
from tests.helpers import held_job, wait_until

DB_NOW = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)
PREFETCH = 4
LIMIT = 2


class MemoryReader:
    """A StreamReader on a list: `supply` new entries (None: without end), each delivered once;
    with `redeliver`, a read that finds no new entry delivers the unacknowledged ones again (what
    XAUTOCLAIM does with entries left idle). `fail_with` is raised by the next read."""

    def __init__(
        self, supply: int | None = None, *, redeliver: bool = False, one_id: bool = False
    ) -> None:
        self.supply = supply
        self.one_id = one_id  # every entry has the id "1-0", in a stream of its own
        self.redeliver = redeliver
        self.delivered = 0
        self.redelivered = 0
        self.pending: dict[tuple[int, str], Delivery] = {}
        self.fail_with: BaseException | None = None
        self._lock = threading.Lock()
        self._quiet = threading.Event()  # never set: a read with nothing to give blocks

    def read(self, count: int, block: float) -> list[Delivery]:
        with self._lock:
            if self.fail_with is not None:
                failure, self.fail_with = self.fail_with, None
                raise failure
            batch = self._new(count)
            if not batch and self.redeliver:
                batch = list(self.pending.values())[:count]
                self.redelivered += len(batch)
        if not batch:
            self._quiet.wait(min(block, 0.05))
        return batch

    def _new(self, count: int) -> list[Delivery]:
        left = count if self.supply is None else min(count, self.supply - self.delivered)
        batch = []
        for _ in range(left):
            self.delivered += 1
            n = self.delivered
            entry_id = "1-0" if self.one_id else f"{n}-0"
            batch.append(Delivery(n, "q", entry_id, job_id=n, token=1))
        self.pending.update(((d.partition, d.entry_id), d) for d in batch)
        return batch

    def ack(self, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            for delivery in deliveries:
                self.pending.pop((delivery.partition, delivery.entry_id), None)

    def close(self) -> None:
        pass


class ScriptedStore:
    """`job_claim_ids` answers as `mode` says: "down" raises, "busy" finds every row locked,
    "up" claims them all."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.claims: list[list[int]] = []

    def job_claim_ids(self, params: JobClaimIdsParams) -> IdClaim:
        ids = [ref.id for ref in params.refs]
        self.claims.append(ids)
        if self.mode == "down":
            raise StoreUnavailable("PostgreSQL is away")
        if self.mode == "busy":
            return IdClaim([], {}, ids, [], DB_NOW)
        return IdClaim([held_job(job_id) for job_id in ids], {}, [], [], DB_NOW)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Wakes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@contextmanager
def source_of(
    reader: MemoryReader, store: ScriptedStore, clock: Clock
) -> Iterator[StreamJobSource]:
    runtime: Any = SimpleNamespace(
        store=store, tasks={}, config=SimpleNamespace(default_max_attempts=3)
    )
    source = StreamJobSource(runtime, "w", reader, prefetch=PREFETCH, block=0.05, monotonic=clock)  # type: ignore[arg-type]
    source.start(Wakes())
    try:
        yield source
    finally:
        source.close()


def ready(source: StreamJobSource, clock: Clock) -> int:
    """Entries a take would find now: read ahead, or held and due."""
    with source._room:
        return len(source._buffer) + sum(h.at <= clock.now for h in source._held)


def held(source: StreamJobSource) -> int:
    with source._room:
        return len(source._buffer) + len(source._held)


def test_while_the_database_is_away_the_source_holds_no_more_than_prefetch() -> None:
    reader, store, clock = MemoryReader(), ScriptedStore("down"), Clock()
    with source_of(reader, store, clock) as source:
        for _ in range(10):
            wait_until(lambda: ready(source, clock) >= LIMIT, timeout=10, what="entries to take")
            with contextlib.suppress(StoreUnavailable):  # raised: see the test after the next
                source.take(LIMIT)
        wait_until(lambda: held(source) >= PREFETCH, timeout=10, what="the source full")
        # Read ahead and held share `prefetch`; only a claim's entries (LIMIT) may come on top.
        assert held(source) <= PREFETCH + LIMIT
        assert reader.delivered <= PREFETCH + LIMIT
        assert len(store.claims) == 10


def test_an_entry_delivered_again_while_held_is_kept_once() -> None:
    reader, store, clock = MemoryReader(LIMIT, redeliver=True), ScriptedStore("down"), Clock()
    with source_of(reader, store, clock) as source:
        wait_until(lambda: ready(source, clock) >= LIMIT, timeout=10, what="entries to take")
        with contextlib.suppress(StoreUnavailable):
            source.take(LIMIT)
        wait_until(lambda: reader.redelivered >= 2 * LIMIT, timeout=10, what="redeliveries")
        assert held(source) == LIMIT


def test_entries_of_different_streams_with_the_same_id_are_all_kept() -> None:
    reader, store, clock = MemoryReader(LIMIT, one_id=True), ScriptedStore("up"), Clock()
    with source_of(reader, store, clock) as source:
        wait_until(lambda: ready(source, clock) >= LIMIT, timeout=10, what="entries to take")
        assert sorted(job.id for job in source.take(LIMIT).jobs) == [1, 2]


def test_entries_whose_claim_failed_are_claimed_once_the_database_is_back() -> None:
    reader, store, clock = MemoryReader(LIMIT), ScriptedStore("down"), Clock()
    with source_of(reader, store, clock) as source:
        wait_until(lambda: ready(source, clock) >= LIMIT, timeout=10, what="entries to take")
        with pytest.raises(StoreUnavailable):
            source.take(LIMIT)
        store.mode = "up"
        taken = source.take(LIMIT)
        assert sorted(job.id for job in taken.jobs) == [1, 2]
        assert reader.pending == {}
        assert held(source) == 0


def test_a_busy_entry_is_asked_again_after_a_doubling_wait_up_to_a_cap() -> None:
    reader, store, clock = MemoryReader(1), ScriptedStore("busy"), Clock()
    waits = []
    with source_of(reader, store, clock) as source:
        wait_until(lambda: ready(source, clock) >= 1, timeout=10, what="an entry to take")
        for _ in range(10):
            taken = source.take(LIMIT)
            assert taken.jobs == [] and taken.due_in is not None
            waits.append(taken.due_in)
            clock.now += taken.due_in
        store.mode = "up"
        assert [job.id for job in source.take(LIMIT).jobs] == [1]
    assert waits[:4] == pytest.approx([BUSY_RETRY, 2 * BUSY_RETRY, 4 * BUSY_RETRY, 8 * BUSY_RETRY])
    assert max(waits) == BUSY_RETRY_MAX
    assert len(store.claims) == 11


def test_the_reader_outlives_an_unexpected_error(caplog: pytest.LogCaptureFixture) -> None:
    reader, store, clock = MemoryReader(LIMIT), ScriptedStore("up"), Clock()
    reader.fail_with = RuntimeError("READONLY You can't write against a read only replica.")
    with source_of(reader, store, clock) as source:
        wait_until(lambda: ready(source, clock) >= LIMIT, timeout=10, what="entries read")
        assert [job.id for job in source.take(LIMIT).jobs] == [1, 2]
    errors = [r for r in caplog.records if getattr(r, "action", "") == "worker.stream_error"]
    assert errors and errors[0].exc_info is not None  # logged with its traceback


class Fatal(BaseException):
    """Ends a thread: not an error a read can be retried after."""


def test_a_reader_thread_that_ended_fails_the_next_take() -> None:
    reader, store, clock = MemoryReader(LIMIT), ScriptedStore("up"), Clock()
    reader.fail_with = Fatal()
    with source_of(reader, store, clock) as source:
        thread = source._thread
        assert thread is not None
        thread.join(timeout=10)
        with pytest.raises(RuntimeError, match="stream reader thread stopped"):
            source.take(LIMIT)
