"""The job source of tiered dispatch: read due jobs from Redis Streams, confirm them by id.

```
  reader thread: StreamReader.read(room, block) ── blocks on XREADGROUP: no polling ──► buffer
                                                                           └─► wake the worker
  take(n): up to n entries (buffer, then early ones now due)
           ── job_claim_ids(ids + staged tokens) ──► PostgreSQL: the attempt starts here
           claimed, gone ─► XACK        early ─► held, asked again at run_at (not acked)
                                        busy  ─► held, asked again in a moment
```

An entry only says "this job was due when its leader moved it". The claim in PostgreSQL decides:
it starts an attempt only for a job still pending with the token it was staged with, and due on
the database clock, so a duplicate entry (a re-stage, a takeover) or one for a cancelled job is
acknowledged and dropped, and a job can never run twice at once. An entry read but never
confirmed (the worker died) stays pending in its consumer group and another worker takes it
over once it has been idle long enough. An idle worker sends nothing to PostgreSQL.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chronoq.core.jobs import Job
from chronoq.errors import ChronoqError
from chronoq.storage.base import IdClaim, JobClaimIdsParams, JobLeaseRef
from chronoq.tier.ports import Delivery, StreamReader
from chronoq.worker.source import Taken

if TYPE_CHECKING:
    from chronoq.runtime import Runtime

log = logging.getLogger("chronoq.worker")
BUSY_RETRY = 0.05
READ_ERROR_PAUSE = 1.0


@dataclass(order=True, slots=True)
class _Held:
    """An entry confirmed too early (or while its row was locked): asked again at `at`."""

    at: float
    delivery: Delivery = field(compare=False)


class StreamJobSource:
    """Takes the jobs of `queues` from `reader` for `worker_id`, holding at most `prefetch`
    entries read ahead of the worker's free slots."""

    def __init__(
        self,
        runtime: Runtime,
        worker_id: str,
        reader: StreamReader,
        *,
        prefetch: int,
        block: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = runtime.store
        self.worker_id = worker_id
        self.reader = reader
        self.prefetch = max(1, prefetch)
        self.block = block
        self._monotonic = monotonic
        self._leases = {name: task.lease for name, task in runtime.tasks.items()}
        self._max_attempts = {name: task.max_attempts for name, task in runtime.tasks.items()}
        self._default_max_attempts = runtime.config.default_max_attempts
        self._buffer: deque[Delivery] = deque()
        self._held: list[_Held] = []
        self._room = threading.Condition()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the port -------------------------------------------------------------------------

    def start(self, wake: Callable[[], None]) -> None:
        self._thread = threading.Thread(
            target=self._read, args=(wake,), name="chronoq-stream", daemon=True
        )
        self._thread.start()

    def take(self, limit: int) -> Taken:
        entries = self._next_entries(limit)
        if not entries:
            return Taken([], due_in=self._next_held_in())
        claim = self._confirm(entries)
        if claim is None:
            self._hold(entries, BUSY_RETRY * 20)
            return Taken([], due_in=self._next_held_in())
        jobs = self._settle(entries, claim)
        with self._room:
            more = bool(self._buffer)
            self._room.notify_all()
        return Taken(jobs, due_in=self._next_held_in(), ready=more)

    def give_back(self, jobs: Sequence[Job]) -> set[int]:
        # Pending again with a new token: their leader stages them again at its next pass.
        return self.store.job_release_many([JobLeaseRef(job.id, job.lease_token) for job in jobs])

    def close(self) -> None:
        self._closing.set()
        with self._room:
            self._room.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.block + 2.0)
        self.reader.close()

    # -- reading ahead --------------------------------------------------------------------

    def _read(self, wake: Callable[[], None]) -> None:
        """Thread: keep up to `prefetch` entries read, blocking on the streams meanwhile."""
        while not self._closing.is_set():
            room = self._wait_for_room()
            if room == 0:
                continue
            try:
                deliveries = self.reader.read(room, self.block)
            except ChronoqError as exc:
                log.warning(
                    "cannot read the job streams: %s",
                    exc,
                    extra={"action": "worker.stream_error", "worker": self.worker_id},
                )
                self._closing.wait(READ_ERROR_PAUSE)
                continue
            if deliveries:
                with self._room:
                    self._buffer.extend(deliveries)
                wake()

    def _wait_for_room(self) -> int:
        with self._room:
            self._room.wait_for(
                lambda: len(self._buffer) < self.prefetch or self._closing.is_set(),
                timeout=self.block,
            )
            return 0 if self._closing.is_set() else max(0, self.prefetch - len(self._buffer))

    # -- confirming -----------------------------------------------------------------------

    def _next_entries(self, limit: int) -> list[Delivery]:
        now = self._monotonic()
        entries: list[Delivery] = []
        while self._held and self._held[0].at <= now and len(entries) < limit:
            entries.append(heapq.heappop(self._held).delivery)
        with self._room:
            while self._buffer and len(entries) < limit:
                entries.append(self._buffer.popleft())
        return entries

    def _confirm(self, entries: list[Delivery]) -> IdClaim | None:
        params = JobClaimIdsParams(
            [JobLeaseRef(entry.job_id, entry.token) for entry in entries],
            self.worker_id,
            leases=self._leases,
            max_attempts=self._max_attempts,
            default_max_attempts=self._default_max_attempts,
        )
        try:
            return self.store.job_claim_ids(params)
        except ChronoqError as exc:
            log.warning(
                "cannot confirm %d stream entries: %s",
                len(entries),
                exc,
                extra={"action": "worker.claim_error", "worker": self.worker_id},
            )
            return None

    def _settle(self, entries: list[Delivery], claim: IdClaim) -> list[Job]:
        """Acknowledge what is decided, hold what must be asked again."""
        claimed = {job.id for job in claim.jobs}
        gone = set(claim.gone)
        done = [e for e in entries if e.job_id in claimed or e.job_id in gone]
        busy = set(claim.busy)
        now = self._monotonic()
        for entry in entries:
            run_at = claim.early.get(entry.job_id)
            if run_at is not None:
                wait = max(0.0, (run_at - claim.db_now).total_seconds())
                heapq.heappush(self._held, _Held(now + wait, entry))
            elif entry.job_id in busy:
                heapq.heappush(self._held, _Held(now + BUSY_RETRY, entry))
        if done:
            self._ack(done)
        return claim.jobs

    def _ack(self, entries: list[Delivery]) -> None:
        try:
            self.reader.ack(entries)
        except ChronoqError as exc:
            # An unacknowledged entry is taken over later and dropped by the claim: no harm.
            log.warning("cannot acknowledge %d stream entries: %s", len(entries), exc)

    def _hold(self, entries: list[Delivery], wait: float) -> None:
        at = self._monotonic() + wait
        for entry in entries:
            heapq.heappush(self._held, _Held(at, entry))

    def _next_held_in(self) -> float | None:
        if not self._held:
            return None
        return max(0.0, self._held[0].at - self._monotonic())
