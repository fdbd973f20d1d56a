"""`RedisStreamReader`: the `StreamReader` port on Redis Streams with one consumer group.

```
 move.lua ──XADD──► <prefix>:{p0}:q:emails  ┐
                    <prefix>:{p1}:q:emails  ├─► XREADGROUP GROUP chronoq <consumer>
                    <prefix>:{p0}:q:reports │     COUNT n BLOCK ms STREAMS (all P x Q keys) > ...
                    ...                     ┘   one blocking call: no polling, woken by XADD
                                              + every claim_idle / 2: XAUTOCLAIM of entries idle
                                                longer than claim_idle (a dead consumer's)
 ack(deliveries) ──► XACK per stream, one pipeline
```

A worker reads every partition's stream of its queues in one XREADGROUP. Redis applies COUNT
to each stream, so one read may return more than asked: the surplus waits in this reader and is
handed out first by the next reads, without a round trip, for at most claim_idle (by then peers
may have claimed it; what they did not is still pending here and comes back by XAUTOCLAIM).

Entries stay pending until `ack`, so a worker that dies leaves them to the XAUTOCLAIM of its
peers after `claim_idle` seconds. An entry only says "this job was due": the claim in the
database (by id and token) decides who runs it. Acknowledge an entry once that claim settled it
(claimed, or gone), not when the job ends: an entry left pending through a long job would be
claimed again by a peer after `claim_idle`, costing it one refused claim. An entry the database
refused as not yet due or busy is not settled: retry it, never acknowledge it away.

Blocking is bounded: `block` seconds (at most the client's socket timeout less one second), so
a worker can stop. Groups are created at start from id 0 with MKSTREAM; when Redis lost them (a
restart without persistence, a flush) a read that meets NOGROUP creates them again and reads on.
A Redis that cannot be reached raises `RedisUnavailable` (a `chronoq.errors.StoreError`): log,
wait and read again; the client reconnects by itself.

Redis Cluster: the streams of different partitions hash to different slots, and a multi-key
XREADGROUP must stay within one slot, so on a cluster (a `RedisCluster` client) new entries are
read one partition per XREADGROUP, by `lanes.PartitionLanes`; claims, acks and group creation
are single-key commands that the cluster's pipeline sends to each key's node.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.typing import KeyT, StreamIdT

from chronoq.tier.ports import Delivery
from chronoq.tier.redis.connection import Client, redis_errors, socket_timeout, translate
from chronoq.tier.redis.keys import check_partition, check_prefix, check_queue, partition_keys
from chronoq.tier.redis.lanes import PartitionLanes
from chronoq.tier.redis.replies import as_list, text

log = logging.getLogger("chronoq.dispatch")

DEFAULT_GROUP = "chronoq"
BLOCK_MARGIN = 1.0  # seconds a blocking read ends before the socket would time out
# A read that meets NOGROUP: create the named stream's group and retry; meet it again, create
# every group and retry once more; a third NOGROUP is an error.
_READ_ATTEMPTS = 3


class RedisStreamReader:
    """Reads due jobs of `queues` from all `partitions` as `consumer` of `group`."""

    def __init__(
        self,
        client: Client,
        prefix: str,
        queues: Sequence[str],
        partitions: int,
        consumer: str,
        group: str = DEFAULT_GROUP,
        claim_idle: float = 30.0,
    ) -> None:
        self.client = client
        self.group = _name(group, "the consumer group")
        self.consumer = _name(consumer, "the consumer")
        self.claim_idle = _positive(claim_idle, "claim_idle")
        self._streams = _stream_map(check_prefix(prefix), queues, partitions)
        self._stream_by_source = {source: stream for stream, source in self._streams.items()}
        self._surplus: deque[tuple[float, Delivery]] = deque()  # (read at, entry)
        self._claim_from = dict.fromkeys(self._streams, "0-0")
        self._next_claim = time.monotonic()  # a fresh worker looks for orphans at once
        self._lanes = self._cluster_lanes(client)
        self.ensure_groups()

    def _cluster_lanes(self, client: Client) -> PartitionLanes | None:
        if not isinstance(client, RedisCluster):
            return None
        by_partition: dict[int, list[str]] = {}
        for stream, (partition, _queue) in self._streams.items():
            by_partition.setdefault(partition, []).append(stream)
        return PartitionLanes(
            client, self.group, self.consumer, by_partition, self.ensure_groups, _stream_entries
        )

    @property
    def streams(self) -> list[str]:
        return list(self._streams)

    def ensure_groups(self, streams: Iterable[str] | None = None) -> None:
        """Create the group on `streams` (default: every stream), from id 0, creating the stream
        too; a group that exists already is left as it is."""
        doing = "create the consumer groups"
        chosen = list(self._streams if streams is None else streams)
        replies = self._each_stream(
            doing, chosen, lambda pipe, stream: pipe.xgroup_create(stream, self.group, "0", True)
        )
        for reply in replies:
            if isinstance(reply, Exception) and not str(reply).startswith("BUSYGROUP"):
                raise translate(self.client, doing, reply) from reply

    def _each_stream(
        self, doing: str, streams: Sequence[str], command: Callable[[Any, str], object]
    ) -> list[Any]:
        """`command(pipeline, stream)` for each of `streams` in one pipeline: the replies in
        order, an error reply in its place as an exception; a failed pipeline raises StoreError."""
        with redis_errors(self.client, doing):
            pipe = self.client.pipeline(transaction=False)
            for stream in streams:
                command(pipe, stream)
            return list(pipe.execute(raise_on_error=False))

    def read(self, count: int, block: float) -> list[Delivery]:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"count must be a positive integer, got {count!r}")
        block_ms = self._block_ms(block)
        self._drop_stale_surplus()
        if not self._surplus:
            self._keep(self._claim_orphans(count))
        if not self._surplus:
            self._keep(self._read_new(count, block_ms))
        return [self._surplus.popleft()[1] for _ in range(min(count, len(self._surplus)))]

    def _keep(self, deliveries: list[Delivery]) -> None:
        now = time.monotonic()
        self._surplus.extend((now, delivery) for delivery in deliveries)

    def _drop_stale_surplus(self) -> None:
        """Forget surplus entries held for claim_idle: peers may have claimed them by now, and
        if none did, they are still pending here and the next claim round takes them back."""
        horizon = time.monotonic() - self.claim_idle
        while self._surplus and self._surplus[0][0] <= horizon:
            self._surplus.popleft()

    def ack(self, deliveries: Sequence[Delivery]) -> None:
        by_stream: dict[str, list[str]] = {}
        for delivery in deliveries:
            by_stream.setdefault(self._stream_of(delivery), []).append(delivery.entry_id)
        if not by_stream:
            return
        doing = "acknowledge stream entries"
        replies = self._each_stream(
            doing,
            list(by_stream),
            lambda pipe, stream: pipe.xack(stream, self.group, *by_stream[stream]),
        )
        for reply in replies:
            # NOGROUP: Redis lost the group, and with it every pending entry: nothing to ack.
            if isinstance(reply, Exception) and not _is_nogroup(reply):
                raise translate(self.client, doing, reply) from reply

    def close(self) -> None:
        """Leave the group where this consumer holds nothing pending (a consumer with pending
        entries stays, so its peers can claim them), and close the client."""
        if self._lanes is not None:
            self._lanes.close()
        try:
            self._forget_consumer()
        except (redis.RedisError, RedisClusterException) as exc:
            log.debug("could not remove consumer %s: %s", self.consumer, exc)
        finally:
            self.client.close()

    def _block_ms(self, block: float) -> int | None:
        """BLOCK in milliseconds, None for no blocking (Redis reads BLOCK 0 as forever)."""
        if not isinstance(block, int | float) or math.isnan(block) or block < 0:
            raise ValueError(f"block must be a number of seconds of at least 0, got {block!r}")
        timeout = socket_timeout(self.client)
        if timeout is not None and block > timeout - BLOCK_MARGIN:
            raise ValueError(
                f"block={block!r}s must end {BLOCK_MARGIN}s before the client's socket timeout"
                f" ({timeout}s): lower it, or connect with a longer socket_timeout"
            )
        return max(1, math.ceil(block * 1000)) if block > 0 else None

    def _read_new(self, count: int, block_ms: int | None) -> list[Delivery]:
        """One XREADGROUP over every stream. A NOGROUP reply names one stream whose group is
        gone: its group is created and the read tried again; a second NOGROUP means more were
        lost (a restart, a flush), and every group is created, once, before the last try."""
        if self._lanes is not None:
            return self._deliveries(self._lanes.read(count, block_ms))
        streams: dict[KeyT, StreamIdT] = dict.fromkeys(self._streams, ">")
        doing = "read the streams"
        for attempt in range(_READ_ATTEMPTS):
            try:
                reply = self.client.xreadgroup(
                    self.group, self.consumer, streams, count=count, block=block_ms
                )
            except redis.RedisError as exc:
                if not _is_nogroup(exc) or attempt == _READ_ATTEMPTS - 1:
                    raise translate(self.client, doing, exc) from exc
                self._recreate_lost_group(str(exc), only_named=attempt == 0)
                continue
            return self._deliveries(_stream_entries(reply))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _recreate_lost_group(self, message: str, *, only_named: bool) -> None:
        named = self._stream_named(message)
        lost = [named] if only_named and named is not None else None
        log.warning(
            "consumer group %s is gone from %s (Redis restarted empty, failed over to an empty"
            " replica, or was flushed): creating it again",
            self.group,
            lost[0] if lost else "the streams",
            extra={"action": "tier.read", "group": self.group},
        )
        self.ensure_groups(lost)

    def _stream_named(self, message: str) -> str | None:
        """The stream a NOGROUP error names ("NOGROUP No such key '<stream>' or consumer group
        ..."), when it is one of ours and readable in the message."""
        for stream in self._streams:
            if f"key '{stream}' or consumer group" in message:
                return stream
        return None

    def _claim_orphans(self, count: int) -> list[Delivery]:
        """Entries idle past claim_idle (their consumer died or hung), at most every
        claim_idle / 2, or at once again after a round that found a full batch."""
        now = time.monotonic()
        if now < self._next_claim:
            return []
        # Set first: a round that fails (a node down) is tried at the next interval, and does
        # not fail every read meanwhile.
        self._next_claim = now + self.claim_idle / 2
        found = self._deliveries(self._autoclaim(count))
        if len(found) >= count:
            self._next_claim = now
        return found

    def _autoclaim(self, count: int) -> list[tuple[str, list[Any]]]:
        """XAUTOCLAIM on every stream in one pipeline. Streams that answer NOGROUP get their
        group back (only those, once per round) and are walked from the start next round."""
        idle_ms = max(1, math.ceil(self.claim_idle * 1000))
        doing = "claim idle stream entries"
        streams = list(self._claim_from)
        replies = self._each_stream(
            doing,
            streams,
            lambda pipe, stream: pipe.xautoclaim(
                stream, self.group, self.consumer, idle_ms, self._claim_from[stream], count=count
            ),
        )
        entries: list[tuple[str, list[Any]]] = []
        lost: list[str] = []
        for stream, reply in zip(streams, replies, strict=True):
            if isinstance(reply, Exception):
                if not _is_nogroup(reply):
                    raise translate(self.client, doing, reply) from reply
                lost.append(stream)
                self._claim_from[stream] = "0-0"
                continue
            cursor, claimed = reply[0], reply[1]
            self._claim_from[stream] = text(cursor)  # "0-0" once the whole list was walked
            entries.append((stream, claimed))
        if lost:
            self.ensure_groups(lost)
        return entries

    def _deliveries(self, entries: Iterable[tuple[str, Sequence[Any]]]) -> list[Delivery]:
        found: list[Delivery] = []
        unreadable: list[Delivery] = []
        for stream, items in entries:
            partition, queue = self._streams[stream]
            for entry_id, fields in items:
                delivery = _delivery(partition, queue, text(entry_id), fields)
                if delivery.job_id < 0:
                    unreadable.append(delivery)
                else:
                    found.append(delivery)
        if unreadable:
            # Nothing can run them, and left pending they would be claimed again and again.
            log.warning(
                "acknowledged %d stream entries without a job id or token",
                len(unreadable),
                extra={"action": "tier.read"},
            )
            self.ack(unreadable)
        return found

    def _stream_of(self, delivery: Delivery) -> str:
        stream = self._stream_by_source.get((delivery.partition, delivery.queue))
        if stream is None:
            raise ValueError(f"{delivery!r} was not read from this reader's streams")
        return stream

    def _forget_consumer(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        for stream in self._streams:
            pipe.xpending_range(stream, self.group, "-", "+", 1, consumername=self.consumer)
        idle_streams = [
            stream
            for stream, pending in zip(
                self._streams, pipe.execute(raise_on_error=False), strict=True
            )
            if not isinstance(pending, Exception) and not pending
        ]
        pipe = self.client.pipeline(transaction=False)
        for stream in idle_streams:
            pipe.xgroup_delconsumer(stream, self.group, self.consumer)
        pipe.execute(raise_on_error=False)


def _stream_map(prefix: str, queues: Sequence[str], partitions: int) -> dict[str, tuple[int, str]]:
    if isinstance(queues, str) or not queues:
        raise ValueError(f"queues must be a non-empty list of queue names, got {queues!r}")
    if check_partition(partitions) < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions!r}")
    names = list(dict.fromkeys(check_queue(queue) for queue in queues))
    return {
        partition_keys(prefix, partition).stream(queue): (partition, queue)
        for partition in range(partitions)
        for queue in names
    }


def _stream_entries(reply: Any) -> list[tuple[str, Sequence[Any]]]:
    """[(stream, [(id, fields), ...]), ...] from XREADGROUP as redis-py parses it: a list of
    [stream, entries] pairs (RESP2, the client of `connect`), or a map of stream to entries."""
    if not reply:
        return []
    pairs = reply.items() if isinstance(reply, Mapping) else reply
    return [(text(stream), as_list(items)) for stream, items in pairs]


def _delivery(partition: int, queue: str, entry_id: str, fields: Any) -> Delivery:
    """The entry as a Delivery; job_id -1 when it holds no readable job and token."""
    values = {text(key): value for key, value in (fields or {}).items()}
    try:
        job_id, token = int(text(values["job"])), int(text(values["token"]))
    except (KeyError, ValueError, TypeError):
        job_id, token = -1, 0
    return Delivery(partition=partition, queue=queue, entry_id=entry_id, job_id=job_id, token=token)


def _is_nogroup(exc: BaseException) -> bool:
    return str(exc).startswith("NOGROUP")


def _name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty name, got {value!r}")
    return value


def _positive(value: float, what: str) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or math.isnan(value)
        or value <= 0
    ):
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return value
