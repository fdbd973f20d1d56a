"""The key layout of the timer tier: every key of partition p carries the hash tag `{p<p>}`.

```
<prefix>:{p7}:epoch        the highest epoch that took partition 7 over (string integer)
<prefix>:{p7}:timers       sorted set: member "<job_id>:<token>:<queue>", score due_ms
<prefix>:{p7}:queues       set: the queues whose streams exist (written by move.lua)
<prefix>:{p7}:q:<queue>    stream of due jobs, fields job and token; consumer group "chronoq"
<prefix>:{p7}:entries      hash: job id -> "<token>:<entry id>" of its newest entry, until trimmed
```

Redis hashes only the text between the first `{` and the next `}`, so all keys of a partition
share one slot and a script may touch them together under Redis Cluster. A prefix holding a
brace would move the tag, so it is refused; a queue may hold anything (it comes after the tag).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "chronoq"


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"the Redis key prefix must be a non-empty string, got {prefix!r}")
    if "{" in prefix or "}" in prefix:
        raise ValueError(
            f"the Redis key prefix {prefix!r} must not hold braces: they would move the hash"
            " tag that keeps a partition's keys in one slot"
        )
    return prefix


def check_queue(queue: str) -> str:
    if not isinstance(queue, str) or not queue:
        raise ValueError(f"a queue name must be a non-empty string, got {queue!r}")
    return queue


def check_partition(partition: int) -> int:
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ValueError(f"a partition must be an integer of at least 0, got {partition!r}")
    return partition


@dataclass(frozen=True, slots=True)
class PartitionKeys:
    """The names of one partition's keys."""

    prefix: str
    partition: int

    @property
    def tagged(self) -> str:
        return f"{self.prefix}:{{p{self.partition}}}"

    @property
    def epoch(self) -> str:
        return f"{self.tagged}:epoch"

    @property
    def timers(self) -> str:
        return f"{self.tagged}:timers"

    @property
    def queues(self) -> str:
        return f"{self.tagged}:queues"

    @property
    def entries(self) -> str:
        return f"{self.tagged}:entries"

    @property
    def stream_prefix(self) -> str:
        """What a stream key starts with; the scripts append the queue."""
        return f"{self.tagged}:q:"

    def stream(self, queue: str) -> str:
        return f"{self.stream_prefix}{queue}"


def partition_keys(prefix: str, partition: int) -> PartitionKeys:
    return PartitionKeys(check_prefix(prefix), check_partition(partition))
