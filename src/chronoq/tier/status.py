"""What the tier looks like right now: per partition its leader and epoch (etcd), its staged and
due timers and its streams (Redis). Read by `chronoq tier status`, the dashboard and /metrics;
it takes no part in any election."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from chronoq.errors import ChronoqError
from chronoq.tier.ports import PartitionStatus

if TYPE_CHECKING:
    from chronoq.coordination.base import PartitionLeader
    from chronoq.runtime import Runtime
    from chronoq.tier.ports import TimerStore


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: str | None
    epoch: int | None
    staged: int
    due: int
    stream_length: int
    stream_lag: int


@dataclass(frozen=True, slots=True)
class TierView:
    dispatch: str
    partitions: list[PartitionView]
    schedulers: list[str]
    # What could not be read, in words ("etcd: ...", "Redis: ..."); the rest is still shown.
    problems: list[str]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def read_tier(runtime: Runtime) -> TierView:
    """The tier of `app` (empty for db dispatch); an unreachable etcd or Redis is named in
    `problems`, not raised, so the other half is still shown."""
    if runtime.config.dispatch != "tiered":
        return TierView(runtime.config.dispatch, [], [], [])
    from chronoq.tier.wiring import open_timer_store, partition_count, read_leaders

    count = partition_count(runtime)
    problems: list[str] = []
    leaders: dict[int, PartitionLeader] = {}
    schedulers: list[str] = []
    try:
        found, schedulers = read_leaders(runtime)
        leaders = {leader.partition: leader for leader in found}
    except ChronoqError as exc:
        problems.append(f"etcd: {exc}")
    statuses: dict[int, PartitionStatus] = {}
    try:
        statuses = _statuses(open_timer_store(runtime), count, runtime)
    except ChronoqError as exc:
        problems.append(f"Redis: {exc}")
    views = [_view(p, leaders.get(p), statuses.get(p)) for p in range(count)]
    return TierView("tiered", views, schedulers, problems)


def partition_statuses(timers: TimerStore, count: int, now_ms: int) -> list[PartitionStatus]:
    return [timers.status(partition, now_ms) for partition in range(count)]


def _statuses(timers: TimerStore, count: int, runtime: Runtime) -> dict[int, PartitionStatus]:
    from chronoq.tier.dbclock import due_ms

    try:
        now_ms = due_ms(runtime.store.db_now())
        return {s.partition: s for s in partition_statuses(timers, count, now_ms)}
    finally:
        timers.close()


def _view(
    partition: int, leader: PartitionLeader | None, status: PartitionStatus | None
) -> PartitionView:
    return PartitionView(
        partition,
        leader.holder if leader is not None else None,
        leader.epoch if leader is not None else None,
        status.staged if status else 0,
        status.due if status else 0,
        status.stream_length if status else 0,
        status.stream_lag if status else 0,
    )


def status_reader(runtime: Runtime) -> Callable[[], list[PartitionStatus]]:
    """For /metrics: each call reads every partition's state from Redis (one client, kept)."""
    from chronoq.tier.dbclock import due_ms
    from chronoq.tier.wiring import open_timer_store, partition_count

    count = partition_count(runtime)
    timers: list[TimerStore] = []

    def read() -> list[PartitionStatus]:
        if not timers:
            timers.append(open_timer_store(runtime))
        return partition_statuses(timers[0], count, due_ms(runtime.store.db_now()))

    return read
