"""`RedisTimerStore`: the `TimerStore` port on Redis, every mutation one fenced Lua script.

```
 leader of partition 7, epoch e
   take_over(7, e) ──► take_over.lua: epoch := e unless a higher one is stored
   stage(7, e, timers) ──► stage.lua: fence, ZADD  <prefix>:{p7}:timers
   move_due(7, e, now_ms, n) ──► move.lua: fence, ZRANGE BYSCORE -inf now_ms LIMIT n,
                                  XADD <prefix>:{p7}:q:<queue>, ZREM       (one atomic call)
   trim(7, e) ──► trim.lua: fence, XTRIM MINID below what every group still needs
```

The fence (`lua/fence.lua`) compares the caller's epoch with the one stored: equal, the script
acts; stored higher, the caller is a stale leader and nothing is written (`Moved.stale`,
`StaleEpoch`); none stored or a lower one, Redis lost the partition (a restart without
persistence, a flush, an older snapshot) and nothing is written either (`Moved.lost`,
`PartitionLost`): the leader takes the partition over again and re-stages from the database.

`move_due` moves at most `limit` timers a call: when it moved `limit` and `next_due_ms` is
still <= now, more are due and the caller calls again at once. Scores are milliseconds of the
database clock, rounded up by the caller, and a timer moves when its score <= now_ms, so none
moves before its job is due.

Failures to reach Redis raise `RedisUnavailable` (a `StoreError`); see `connection`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from chronoq.tier.ports import (
    MAX_DUE_MS,
    Moved,
    MovedEntry,
    PartitionLost,
    PartitionStatus,
    Staged,
    StaleEpoch,
    Takeover,
    Timer,
    check_whole,
)
from chronoq.tier.redis.connection import Client, redis_errors
from chronoq.tier.redis.keys import (
    DEFAULT_PREFIX,
    PartitionKeys,
    check_prefix,
    check_queue,
    partition_keys,
)
from chronoq.tier.redis.replies import as_list, integer, optional_integer, text
from chronoq.tier.redis.scripts import register_timer_scripts
from chronoq.tier.redis.streams import DEFAULT_GROUP

log = logging.getLogger("chronoq.dispatch")

# At 5 µs of Redis CPU per timer (docs/tier notes), 1,000 a call keep each call near 5 ms.
STAGE_BATCH = 1_000
MAX_MOVE_LIMIT = 10_000
# A consumer idle this long and holding nothing is a worker gone: trim deletes it from its group.
DEAD_CONSUMER_IDLE = 3600.0


class RedisTimerStore:
    """Timers of every partition in one Redis (or one Redis Cluster slot per partition)."""

    def __init__(self, client: Client, prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.prefix = check_prefix(prefix)
        self._scripts = register_timer_scripts(client)

    def keys(self, partition: int) -> PartitionKeys:
        return partition_keys(self.prefix, partition)

    def take_over(self, partition: int, epoch: int, *, force: bool = False) -> Takeover:
        keys = self.keys(partition)
        args = [_epoch(epoch), 1 if force else 0]
        with redis_errors(self.client, f"take partition {partition} over"):
            reply = self._scripts.take_over(keys=[keys.epoch], args=args)
        status, lost, _stored = as_list(reply)
        return Takeover(accepted=text(status) == "ok", lost=integer(lost) == 1)

    def stage(self, partition: int, epoch: int, timers: Sequence[Timer]) -> Staged:
        keys = self.keys(partition)
        pairs = [field for timer in timers for field in _score_and_member(timer)]
        added, moved = 0, list[MovedEntry]()
        # An empty call still runs the fence, so a stale leader hears of it.
        for start in range(0, max(len(pairs), 1), 2 * STAGE_BATCH):
            batch = self._stage_batch(keys, _epoch(epoch), pairs[start : start + 2 * STAGE_BATCH])
            added += batch.added
            moved.extend(batch.moved)
        return Staged(added, tuple(moved))

    def _stage_batch(self, keys: PartitionKeys, epoch: int, pairs: list[int | str]) -> Staged:
        script_keys = [keys.epoch, keys.timers, keys.entries]
        with redis_errors(self.client, f"stage timers of partition {keys.partition}"):
            args = [epoch, keys.stream_prefix, DEFAULT_GROUP, *pairs]
            reply = as_list(self._scripts.stage(keys=script_keys, args=args))
        _raise_refusal(keys.partition, epoch, reply)
        return Staged(integer(reply[1]), _moved_entries(reply[2:]))

    def move_due(self, partition: int, epoch: int, now_ms: int, limit: int) -> Moved:
        keys = self.keys(partition)
        args: list[int | str] = [
            _epoch(epoch),
            _millis(now_ms, "now_ms"),
            _limit(limit),
            keys.stream_prefix,
        ]
        with redis_errors(self.client, f"move due timers of partition {partition}"):
            reply = as_list(
                self._scripts.move(
                    keys=[keys.epoch, keys.timers, keys.queues, keys.entries], args=args
                )
            )
        status = text(reply[0])
        if status != "ok":
            return Moved(moved=0, stale=status == "stale", lost=status == "lost", next_due_ms=None)
        if dropped := integer(reply[3]):
            log.warning(
                "dropped %d malformed timers of partition %d",
                dropped,
                partition,
                extra={"action": "tier.move", "partition": partition},
            )
        return Moved(
            moved=integer(reply[1]),
            stale=False,
            lost=False,
            next_due_ms=optional_integer(reply[2]),
            entries=_moved_entries(reply[4:]),
        )

    def trim(self, partition: int, epoch: int) -> int:
        """Drop stream entries every consumer group has acknowledged, and consumers idle for
        DEAD_CONSUMER_IDLE holding nothing; returns how many entries. Raises StaleEpoch or
        PartitionLost, having trimmed nothing."""
        keys = self.keys(partition)
        idle_ms = int(DEAD_CONSUMER_IDLE * 1000)
        args: list[int | str] = [_epoch(epoch), keys.stream_prefix, idle_ms]
        with redis_errors(self.client, f"trim the streams of partition {partition}"):
            reply = as_list(
                self._scripts.trim(keys=[keys.epoch, keys.queues, keys.entries], args=args)
            )
        _raise_refusal(partition, epoch, reply)
        return integer(reply[1])

    def waiting(self, partition: int, entries: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        keys = self.keys(partition)
        found: set[tuple[str, str]] = set()
        for start in range(0, len(entries), STAGE_BATCH):
            batch = entries[start : start + STAGE_BATCH]
            args: list[int | str] = [keys.stream_prefix, DEFAULT_GROUP]
            for queue, entry_id in batch:
                args += [check_queue(queue), entry_id]
            with redis_errors(self.client, f"look for waiting entries of partition {partition}"):
                reply = as_list(self._scripts.waiting(keys=[keys.queues], args=args))
            found.update(batch[integer(position) - 1] for position in reply)
        return found

    def status(self, partition: int, now_ms: int) -> PartitionStatus:
        keys = self.keys(partition)
        with redis_errors(self.client, f"read the status of partition {partition}"):
            pipe = self.client.pipeline(transaction=False)
            pipe.get(keys.epoch)
            pipe.zcard(keys.timers)
            pipe.zcount(keys.timers, "-inf", _millis(now_ms, "now_ms"))
            pipe.smembers(keys.queues)
            epoch, staged, due, queues = pipe.execute()
            length, lag = self._stream_totals(
                [keys.stream(text(queue)) for queue in sorted(queues, key=text)]
            )
        return PartitionStatus(
            partition=partition,
            epoch=optional_integer(epoch),
            staged=integer(staged),
            due=integer(due),
            stream_length=length,
            stream_lag=lag,
        )

    def _stream_totals(self, streams: list[str]) -> tuple[int, int]:
        """Entries held and entries not yet delivered, summed over `streams`. A group's lag is
        what Redis 7 reports; where it cannot tell (entries deleted out of order), the stream's
        length stands in, an upper bound."""
        pipe = self.client.pipeline(transaction=False)
        for stream in streams:
            pipe.xlen(stream)
            pipe.xinfo_groups(stream)
        replies = pipe.execute(raise_on_error=False)
        length = lag = 0
        for stream_length, groups in zip(replies[::2], replies[1::2], strict=True):
            if isinstance(stream_length, Exception) or isinstance(groups, Exception):
                continue  # deleted since SMEMBERS: nothing to count
            length += integer(stream_length)
            lag += max((_group_lag(group, stream_length) for group in groups), default=0)
        return length, lag

    def close(self) -> None:
        self.client.close()


def _group_lag(group: dict[str, object], stream_length: int) -> int:
    reported = group.get("lag")
    return stream_length if reported is None else integer(reported)


def _raise_refusal(partition: int, epoch: int, reply: Sequence[object]) -> None:
    status = text(reply[0])
    if status == "ok":
        return
    stored = optional_integer(reply[1])
    if status == "stale":
        raise StaleEpoch(
            f"partition {partition}: epoch {epoch} is stale, Redis holds epoch {stored}"
        )
    held = "none" if stored is None else f"epoch {stored}"
    raise PartitionLost(
        f"partition {partition}: Redis lost it (leader's epoch {epoch}, Redis holds {held}):"
        " take it over again and re-stage"
    )


def _moved_entries(flat: Sequence[object]) -> tuple[MovedEntry, ...]:
    """move.lua's job, token and entry id triplets."""
    return tuple(
        MovedEntry(integer(job), integer(token), text(entry_id))
        for job, token, entry_id in zip(flat[0::3], flat[1::3], flat[2::3], strict=True)
    )


def _score_and_member(timer: Timer) -> tuple[int, str]:
    """A Timer checked its own fields when it was built (see ports.Timer)."""
    if not isinstance(timer, Timer):
        raise TypeError(f"stage() takes Timer values, got {timer!r}")
    return timer.due_ms, f"{timer.job_id}:{timer.token}:{check_queue(timer.queue)}"


def _epoch(epoch: int) -> int:
    return check_whole(epoch, "the epoch", minimum=0)


def _millis(value: int, name: str) -> int:
    # Scores are doubles: integers beyond 2**53 would lose their last digits.
    return check_whole(value, name, minimum=0, maximum=MAX_DUE_MS)


def _limit(limit: int) -> int:
    whole = check_whole(limit, "the move limit", minimum=1)
    if whole > MAX_MOVE_LIMIT:
        raise ValueError(
            f"the move limit must be at most {MAX_MOVE_LIMIT} (a bounded batch keeps Redis"
            f" responsive; call again while batches come back full), got {limit!r}"
        )
    return whole
