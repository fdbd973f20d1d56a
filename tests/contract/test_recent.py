"""The sliding window of finished jobs that the dashboard and the metrics read a little at a
time: read incrementally, it must count what a whole read counts."""

from __future__ import annotations

from pathlib import Path

from chronoq.core.jobs import Outcome
from chronoq.observability.recent import RecentFinished
from chronoq.storage.base import OverviewParams
from chronoq.storage.sqlite.store import SqliteStore

from .support import Store, claim, finish, insert, params


def _finish(store: Store, count: int, outcome: Outcome = Outcome.DONE) -> None:
    insert(store, *[params() for _ in range(count)])
    for job in claim(store, limit=count):
        assert finish(store, job, outcome)


def _totals(buckets: list) -> dict[tuple[str, str], int]:  # type: ignore[type-arg]
    totals: dict[tuple[str, str], int] = {}
    for b in buckets:
        totals[(b.queue, str(b.status))] = totals.get((b.queue, str(b.status)), 0) + b.count
    return totals


def test_incremental_reads_count_what_a_whole_read_counts(store: Store) -> None:
    recent = RecentFinished(window=300, bucket=10)
    assert recent.read(store).finished == []
    _finish(store, 3)
    first = recent.read(store)
    assert _totals(first.finished) == {("q", "done"): 3}
    _finish(store, 2, Outcome.DEAD)
    _finish(store, 4)
    second = recent.read(store)
    whole = store.overview(OverviewParams(window=300, bucket=10))
    assert second.finished == whole.finished
    assert _totals(second.finished) == {("q", "done"): 7, ("q", "dead"): 2}
    assert recent.read(store).finished == whole.finished  # a read with nothing new


def test_a_new_store_is_read_whole(store: Store, tmp_path: Path) -> None:
    recent = RecentFinished()
    _finish(store, 2)
    assert _totals(recent.read(store).finished) == {("q", "done"): 2}
    other = SqliteStore(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        assert recent.read(other).finished == []
    finally:
        other.close()
