"""The attempts a worker holds: running, claimed ahead, or finished and waiting to be reported.

One `Holdings` per worker is the state its collaborators share: the claim loop adds to it, the
runner and the reporter take from it, the lease keeper heartbeats what is in it, and the
watchdog reads it. All of them run on the worker's event loop, except the watchdog's thread,
which only reads while the loop is blocked.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chronoq.core.jobs import Job, Outcome
from chronoq.observability.events import Observers
from chronoq.storage.base import JobStore
from chronoq.worker.context import JobContext


@dataclass(eq=False, slots=True)
class Attempt:
    """One attempt of a job this worker holds a lease on (slots: the worker builds one a job)."""

    job: Job
    ctx: JobContext
    started: float = field(default_factory=time.monotonic)
    heartbeat_due: float = 0.0
    task: asyncio.Task[None] | None = None
    in_thread: bool = False
    # An async handler is running on the event loop (the suspects when the loop is blocked).
    on_loop: bool = False
    # A sync handler ran past its task's timeout and its thread is still running.
    stuck: bool = False
    # The handler is done and its result waits for the reporter. Heartbeats go on (a slow
    # report must not let the lease lapse), but a refused one may just have crossed the report.
    reporting: bool = False
    # How the attempt ended, once its handler is done, and what the handler raised, if it did.
    outcome: Outcome | None = None
    exception: BaseException | None = None

    def __post_init__(self) -> None:
        self.heartbeat_due = self.started + self.job.lease_seconds / 3

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Holdings:
    """Every job the worker holds a lease on, and which of them wait for a slot."""

    __slots__ = ("buffer", "owned", "running")

    def __init__(self) -> None:
        self.owned: dict[int, Attempt] = {}
        # Claimed ahead, waiting for a slot (leased and heartbeated like running jobs).
        self.buffer: collections.deque[Attempt] = collections.deque()
        # Handlers executing now. Slots free when a handler returns, not when its result is
        # stored, so the next claim overlaps the previous batch's report.
        self.running = 0

    def __len__(self) -> int:
        return len(self.owned)

    def __iter__(self) -> Iterator[Attempt]:
        return iter(self.owned.values())

    def hold(self, attempt: Attempt) -> None:
        """A claimed job: held, and waiting for a slot."""
        self.owned[attempt.job.id] = attempt
        self.buffer.append(attempt)

    def start_next(self, concurrency: int) -> list[Attempt]:
        """The claimed jobs to start now, first claimed first, as many as slots are free;
        counts them as running. One call for a batch, not one per job."""
        count = min(len(self.buffer), concurrency - self.running)
        if count <= 0:
            return []
        self.running += count
        popleft = self.buffer.popleft
        return [popleft() for _ in range(count)]

    def disown(self, job: Job) -> Attempt | None:
        """Forget the attempt `job` stands for. A stale attempt that ends after this worker
        claimed its job again must not take the newer attempt's entry with it: that one would
        no longer be heartbeated, and would lose its lease too."""
        attempt = self.owned.get(job.id)
        if attempt is None or attempt.job.lease_token != job.lease_token:
            return None
        return self.owned.pop(job.id)

    def take_buffered(self) -> list[Attempt]:
        """At shutdown: the claimed jobs that never started, no longer held."""
        waiting = [self.owned.pop(attempt.job.id) for attempt in self.buffer]
        self.buffer.clear()
        return waiting


@dataclass(frozen=True, slots=True)
class Shared:
    """What the worker's collaborators share: the store, the worker's way to call it without
    blocking the loop (`io(fn, *args)` runs `fn` in its I/O threads), its holdings, and its
    events."""

    store: JobStore
    io: Callable[..., Awaitable[Any]]
    holdings: Holdings
    events: Observers
    worker_id: str
