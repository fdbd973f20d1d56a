"""Reading new entries on a Redis Cluster: one XREADGROUP per partition, each in its slot.

A multi-key XREADGROUP must stay within one hash slot, and every partition has a slot of its
own (keys.py), so a worker on a cluster cannot block on all its streams in one call. It reads
in two steps:

```
 sweep: XREADGROUP COUNT n STREAMS <partition's streams> >      one per partition, no BLOCK,
        in one pipeline: the client sends one batch per node    = one round trip per node
           │ nothing found, and the caller may wait
           ▼
 wait:  XREADGROUP COUNT n BLOCK ms ... >   one per partition, each on a thread and a
        connection of its own (a lane), on the node serving that partition; the read returns
        as soon as one lane has entries, or once `block` has passed
```

A lane still blocked when the read returns goes on until its own BLOCK ends (bounded by
`block`); what it reads is handed out by the next read, first. No lane is started for a
partition whose lane is still out, so a worker never holds more than one blocking read per
partition: idle, it sends one XREADGROUP per partition per `block` seconds and holds one
connection per partition, and it wakes on an XADD as fast as on a single node. One node down (a
failover) fails the sweep's pipeline and the lanes of its partitions, not the other lanes: they
keep delivering while the read waits.

A NOGROUP reply (the partition's node restarted empty, or failed over to a replica that had not
synced) re-creates the groups of that partition's streams only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from redis.typing import KeyT, StreamIdT

from chronoq.errors import StoreError
from chronoq.tier.redis.connection import Client, redis_errors, translate

Entries = list[tuple[str, Sequence[Any]]]  # [(stream, [(id, fields), ...]), ...]
WAIT_MARGIN = 0.5  # seconds a read waits for its lanes beyond their BLOCK


class PartitionLanes:
    """New entries of `streams` (by partition) for `consumer` of `group` on a cluster."""

    def __init__(
        self,
        client: Client,
        group: str,
        consumer: str,
        streams: Mapping[int, Sequence[str]],
        recreate: Callable[[Sequence[str]], None],
        parse: Callable[[Any], Entries],
    ) -> None:
        self.client = client
        self.group = group
        self.consumer = consumer
        self._streams = {partition: list(names) for partition, names in streams.items()}
        self._recreate = recreate
        self._parse = parse
        self._pool = ThreadPoolExecutor(len(self._streams), thread_name_prefix="chronoq-lane")
        self._out: dict[int, Future[Entries]] = {}

    def read(self, count: int, block_ms: int | None) -> Entries:
        found, errors = self._collect()
        if not found:
            try:
                found, errors = self._sweep(count)
            except StoreError as exc:  # a node down fails the whole pipeline: the lanes do not
                found, errors = [], [exc]
        if not found and block_ms:
            found, failed = self._wait(count, block_ms)
            errors += failed
        if not found and errors:
            raise errors[0]
        return found

    def close(self) -> None:
        """Stop the lanes, waiting for those out (each ends within its BLOCK): what they read
        is then pending to this consumer before the reader decides whether to leave the group
        (a consumer removed with entries pending would take them out of the group)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _sweep(self, count: int) -> tuple[Entries, list[StoreError]]:
        doing = "read the streams"
        partitions = list(self._streams)
        with redis_errors(self.client, doing):
            pipe = self.client.pipeline(transaction=False)
            for partition in partitions:
                pipe.xreadgroup(self.group, self.consumer, self._ids(partition), count=count)
            replies = pipe.execute(raise_on_error=False)
        found: Entries = []
        errors: list[StoreError] = []
        lost: list[str] = []
        for partition, reply in zip(partitions, replies, strict=True):
            if not isinstance(reply, Exception):
                found.extend(self._parse(reply))
            elif str(reply).startswith("NOGROUP"):
                lost.extend(self._streams[partition])
            else:
                errors.append(translate(self.client, doing, reply))
        if lost:
            self._recreate(lost)
        return found, errors

    def _wait(self, count: int, block_ms: int) -> tuple[Entries, list[StoreError]]:
        for partition in self._streams:
            if partition not in self._out:
                self._out[partition] = self._pool.submit(self._blocking, partition, count, block_ms)
        # Until a lane has entries: one that fails (its node is down) does not end the wait
        # for the others.
        deadline = time.monotonic() + block_ms / 1000 + WAIT_MARGIN
        found: Entries = []
        errors: list[StoreError] = []
        while not found and self._out and (left := deadline - time.monotonic()) > 0:
            wait(list(self._out.values()), left, FIRST_COMPLETED)
            more, failed = self._collect()
            found += more
            errors += failed
        return found, errors

    def _blocking(self, partition: int, count: int, block_ms: int) -> Entries:
        """A lane: one blocking XREADGROUP over one partition's streams."""
        try:
            reply = self.client.xreadgroup(
                self.group, self.consumer, self._ids(partition), count=count, block=block_ms
            )
        except Exception as exc:
            if not str(exc).startswith("NOGROUP"):
                doing = f"read the streams of partition {partition}"
                raise translate(self.client, doing, exc) from exc
            self._recreate(self._streams[partition])
            return []
        return self._parse(reply)

    def _collect(self) -> tuple[Entries, list[StoreError]]:
        """What lanes that ended have read, and how those that failed failed."""
        found: Entries = []
        errors: list[StoreError] = []
        for partition, future in list(self._out.items()):
            if not future.done():
                continue
            del self._out[partition]
            try:
                found.extend(future.result())
            except StoreError as exc:
                errors.append(exc)
        return found, errors

    def _ids(self, partition: int) -> dict[KeyT, StreamIdT]:
        return dict.fromkeys(self._streams[partition], ">")
