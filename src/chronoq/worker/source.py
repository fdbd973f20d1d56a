"""The port a worker takes jobs from.

"Give me up to N jobs I now own, and tell me when to ask again." The worker asks its source for
no more jobs than it has free slots (see `chronoq.worker.pacing`), runs them, and reports how
each ended to the store, fenced by the lease token the source's claim gave it. How the jobs get
to the worker is the source's business: `DbJobSource` claims due rows from the jobs table
(`FOR UPDATE SKIP LOCKED` on PostgreSQL) and wakes the worker on the store's change signal; a
source reading a queue that a scheduler tier fills is another implementation of the same port,
and nothing else in the worker changes for it.

Every method but `start` blocks on I/O: the worker calls them from its I/O threads, and
`take` also from the thread that calls `wake`, inside that call (a waiting worker's claim is
sent by the thread that wakes it, see `chronoq.worker.wakeclaim`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from chronoq.core.jobs import Job


@dataclass(frozen=True, slots=True)
class Taken:
    """What one `take` returns: jobs the worker now owns (each with a new attempt and lease
    token), and when to ask again if it came back short.

    `due_in`: seconds from the take until the source expects its next job (None: nothing is
    known, ask again within the poll interval). `ready`: there is more to take at once (the
    source just put expired leases back, say). `contended`: jobs are due that this take did
    not get, most likely because another worker holds them right now."""

    jobs: list[Job]
    due_in: float | None = None
    ready: bool = False
    contended: bool = False


class JobSource(Protocol):
    def start(self, wake: Callable[[], None]) -> None:
        """Begin calling `wake` (from any thread but the worker's loop) whenever jobs may have
        become available. `wake` may call `take` before it returns."""

    def take(self, limit: int) -> Taken:
        """Up to `limit` jobs, now owned by the worker."""

    def give_back(self, jobs: Sequence[Job]) -> set[int]:
        """Return taken jobs that never started, without using an attempt; the ids given
        back (the others were no longer the worker's)."""

    def close(self) -> None:
        """Stop the wake-ups; the worker is stopping."""
