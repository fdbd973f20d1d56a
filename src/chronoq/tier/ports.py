"""The ports of tiered dispatch: where staged timers live, and where workers read due jobs.

```
 PostgreSQL (system of record) ── stage (leader, epoch) ──► TimerStore: one sorted set per
                                                             partition, score = run_at (ms)
                                    move_due (leader, epoch, now) ──► one stream per
                                                             (partition, queue)
 StreamReader (worker) ◄── read / ack ─────────────────────┘
```

A timer is a pending job as its leader saw it when staging: id, lease token and queue, due at
`due_ms`, milliseconds since the epoch on the database clock, rounded up so that a timer never
fires before its job is due. Every mutation by a leader names the partition's epoch; one made
with a stale epoch changes nothing and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# Scores are doubles: integers beyond 2**53 would lose their last digits.
MAX_DUE_MS = 2**53 - 1


@dataclass(frozen=True, slots=True)
class Timer:
    """A pending job as its leader staged it. Built only with fields a timer store can hold:
    a value that cannot be staged raises ValueError here, for the one row that carries it."""

    job_id: int
    token: int
    queue: str
    due_ms: int

    def __post_init__(self) -> None:
        check_whole(self.job_id, "a timer's job_id", minimum=0)
        check_whole(self.token, "a timer's token")
        check_whole(self.due_ms, "a timer's due_ms", minimum=0, maximum=MAX_DUE_MS)
        if not isinstance(self.queue, str) or not self.queue:
            raise ValueError(f"a timer's queue must be a non-empty string, got {self.queue!r}")


def check_whole(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """`value` when it is an integer within the bounds given, else ValueError naming it."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class MovedEntry:
    """A stream entry a move added: the job and token it names, and its id on its stream."""

    job_id: int
    token: int
    entry_id: str


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a new leader finds when it takes a partition over in the timer store.

    `accepted`: the epoch was recorded (False: the store already holds a higher epoch, so this
    leadership is stale and must not act). `lost`: the store had no record of the partition
    while a previous epoch had written one (a restart without persistence, a flush): everything
    staged may be gone and the leader re-stages its horizon from the database."""

    accepted: bool
    lost: bool


@dataclass(frozen=True, slots=True)
class Staged:
    """What one stage did: `added` timers were new (one staged again only changes its due
    time); `moved` were not staged, as their jobs already have an entry under the same token
    on a stream, moved by this leader or a predecessor and not trimmed yet."""

    added: int
    moved: tuple[MovedEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class Moved:
    """What one move did: `moved` timers added to their streams; `stale`: the epoch was refused
    and nothing moved; `lost`: the store has no record of the partition any more (Redis
    restarted empty or was flushed): nothing moved, take it over again and re-stage;
    `next_due_ms`: the earliest timer left (None: none); `entries`: the entries added."""

    moved: int
    stale: bool
    lost: bool
    next_due_ms: int | None
    entries: tuple[MovedEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    partition: int
    epoch: int | None
    staged: int
    due: int
    stream_length: int
    stream_lag: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """One stream entry read by a worker: a job that was due when its leader moved it."""

    partition: int
    queue: str
    entry_id: str
    job_id: int
    token: int


class StaleEpoch(Exception):
    """A leader's write named an epoch lower than the one the timer store holds."""


class PartitionLost(Exception):
    """The timer store has no record of a partition its leader took over: data was lost."""


class TimerStore(Protocol):
    def take_over(self, partition: int, epoch: int, *, force: bool = False) -> Takeover:
        """Record `epoch` for `partition` unless a higher one is stored. `force` records it
        anyway: only for a leader that has shown the stored epoch belongs to no live leader
        (see lua/take_over.lua)."""
        ...

    def stage(self, partition: int, epoch: int, timers: Sequence[Timer]) -> Staged:
        """Add or update timers, but none whose job has an entry under its token on a stream
        already. Raises StaleEpoch, or PartitionLost when the store has no record of the
        partition."""
        ...

    def move_due(self, partition: int, epoch: int, now_ms: int, limit: int) -> Moved: ...

    def trim(self, partition: int, epoch: int) -> int:
        """Drop stream entries every consumer group has acknowledged, and consumers long idle
        that hold nothing; returns how many entries. Raises StaleEpoch or PartitionLost."""
        ...

    def waiting(self, partition: int, entries: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Of (queue, entry id) pairs, those whose entries still wait for a worker to settle
        them: not read yet, or read and not acknowledged."""
        ...

    def status(self, partition: int, now_ms: int) -> PartitionStatus: ...

    def close(self) -> None: ...


class StreamReader(Protocol):
    def read(self, count: int, block: float) -> list[Delivery]:
        """Up to `count` entries: new ones, and ones a dead consumer left unacknowledged.
        Blocks up to `block` seconds when there are none."""
        ...

    def ack(self, deliveries: Sequence[Delivery]) -> None: ...

    def close(self) -> None: ...
