"""The queues' part of the store port: pause, rate and concurrency limits, key limits.

Its statements are in each dialect's `queues.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from chronoq.core.ratelimit import KeyLimit


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's stored settings; a queue never configured is unpaused and unlimited."""

    name: str
    paused: bool = False
    rate: float | None = None
    burst: float | None = None
    concurrency: int | None = None
    key_limits: tuple[KeyLimit, ...] = ()

    @property
    def limited(self) -> bool:
        return self.rate is not None or self.concurrency is not None or bool(self.key_limits)


@dataclass(frozen=True, slots=True)
class QueueRemoval:
    """What `queue_remove` did: `removed` is True when stored settings were deleted. A queue
    with `pending` or `running` jobs keeps its settings (and `removed` is False)."""

    name: str
    removed: bool
    pending: int = 0
    running: int = 0

    @property
    def busy(self) -> bool:
        return self.pending > 0 or self.running > 0


@dataclass(frozen=True, slots=True)
class QueueLimitParams:
    """Set a queue's rate (jobs/s, with its bucket size) and concurrency; None removes each."""

    name: str
    rate: float | None = None
    burst: float | None = None
    concurrency: int | None = None


class QueuesPort(Protocol):
    """Queue settings, stored apart from the jobs."""

    def queue_list(self) -> list[QueueSettings]: ...

    def queue_get(self, name: str) -> QueueSettings: ...

    def queue_pause(self, name: str, paused: bool) -> QueueSettings: ...

    def queue_limit(self, params: QueueLimitParams) -> QueueSettings: ...

    def key_limit_set(self, queue: str, limit: KeyLimit) -> QueueSettings: ...

    def key_limit_remove(self, queue: str, pattern: str) -> bool: ...

    def queue_names(self) -> list[str]:
        """Every queue with jobs (of any status) or stored settings, in byte order."""
        ...

    def queue_remove(self, name: str) -> QueueRemoval:
        """Delete a queue's stored settings (pause, limits, key limits and their buckets),
        unless it has pending or running jobs. A job enqueued on it afterwards finds it
        unpaused and unlimited, as a queue never configured."""
        ...
