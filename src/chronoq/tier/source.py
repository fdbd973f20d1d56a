"""The job source of tiered dispatch: read due jobs from Redis Streams, confirm them by id.

```
  reader thread: StreamReader.read(room, block) ── blocks on XREADGROUP: no polling ──► buffer
                 room = prefetch - buffered - held                         └─► wake the worker
  take(n): up to n entries (held ones now due, then the buffer)
           ── job_claim_ids(ids + staged tokens) ──► PostgreSQL: the attempt starts here
           claimed, gone ─► XACK        early ─► held, asked again at run_at (not acked)
                                        busy  ─► held, asked again after 50 ms, 100 ms, ... 3 s
           the claim fails ─► held, and the error goes to the worker, which backs off
```

An entry only says "this job was due when its leader moved it". The claim in PostgreSQL decides:
it starts an attempt only for a job still pending with the token it was staged with, and due on
the database clock, so a duplicate entry (a re-stage, a takeover) or one for a cancelled job is
acknowledged and dropped, and a job can never run twice at once. An entry read but never
confirmed (the worker died) stays pending in its consumer group and another worker takes it
over once it has been idle long enough. An idle worker sends no claim to PostgreSQL.

What a worker holds is bounded whatever the database does: entries read ahead and entries held
share `prefetch`, so while PostgreSQL is away the reader stops reading once that is full, and the
worker's claims fail and back off as they do with dispatch "db". The reader thread survives
every error of a read (it logs it and backs off); if it ever ends otherwise, `take` raises and
the worker stops rather than stay up running nothing.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chronoq.core.backoff import Backoff
from chronoq.core.jobs import Job
from chronoq.errors import ChronoqError
from chronoq.storage.base import IdClaim, JobClaimIdsParams, JobLeaseRef
from chronoq.tier.ports import Delivery, StreamReader
from chronoq.worker.source import Taken

if TYPE_CHECKING:
    from chronoq.runtime import Runtime

log = logging.getLogger("chronoq.worker")
# An entry whose row another transaction holds is asked again after BUSY_RETRY, doubling each
# time it is found busy again, up to BUSY_RETRY_MAX: a row locked for long (a slow admin
# transaction) costs a claim every few seconds, not twenty a second.
BUSY_RETRY = 0.05
BUSY_RETRY_MAX = 3.0
# After failed reads the reader thread waits up to READ_ERROR_PAUSE, doubling up to
# READ_ERROR_PAUSE_MAX while reads keep failing (with full jitter, so a fleet that lost Redis
# together does not come back in step); a read that succeeds starts over.
READ_ERROR_PAUSE = 0.1
READ_ERROR_PAUSE_MAX = 5.0


BUSY_BACKOFF = Backoff(BUSY_RETRY, BUSY_RETRY_MAX)
READ_BACKOFF = Backoff(READ_ERROR_PAUSE, READ_ERROR_PAUSE_MAX)


def busy_wait(times: int) -> float:
    """How long an entry found busy `times` times in a row waits before it is asked again."""
    return BUSY_BACKOFF.window(times - 1)


def read_pause(failures: int) -> float:
    """How long the reader waits after `failures` failed reads in a row (full jitter, but never
    less than READ_ERROR_PAUSE)."""
    return max(READ_ERROR_PAUSE, READ_BACKOFF.delay(failures - 1))


# A stream entry's identity: its id is unique within its stream only.
Entry = tuple[int, str, str]


def _entry(delivery: Delivery) -> Entry:
    return (delivery.partition, delivery.queue, delivery.entry_id)


@dataclass(order=True, slots=True)
class _Held:
    """An entry confirmed too early (or while its row was locked): asked again at `at`."""

    at: float
    delivery: Delivery = field(compare=False)


class StreamJobSource:
    """Takes the jobs of `queues` from `reader` for `worker_id`, holding at most `prefetch`
    entries (read ahead, or held to be asked again), besides those being confirmed."""

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
        # Under `_room`'s lock: the entries read ahead, those held, and the ids of every entry
        # the source has (read ahead, held or being confirmed), so that one of them delivered
        # again (our own XAUTOCLAIM takes back entries held past its idle time) is not kept twice.
        self._buffer: deque[Delivery] = deque()
        self._held: list[_Held] = []
        self._have: set[Entry] = set()
        self._busy: dict[Entry, int] = {}  # times found busy in a row
        self._room = threading.Condition()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # -- the port -------------------------------------------------------------------------

    def start(self, wake: Callable[[], None]) -> None:
        self._thread = threading.Thread(
            target=self._read, args=(wake,), name="chronoq-stream", daemon=True
        )
        self._thread.start()

    def take(self, limit: int) -> Taken:
        self._check_reader()
        entries = self._next_entries(limit)
        if not entries:
            return Taken([], due_in=self._next_held_in())
        jobs = self._settle(entries, self._confirm(entries))
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
        """Thread: keep up to `prefetch` entries, blocking on the streams meanwhile. It outlives
        any error of a read; should it end some other way, the worker's next take says so."""
        try:
            self._read_until_closed(wake)
        except BaseException as exc:
            self._failure = exc
            log.critical(
                "the stream reader stopped: %r",
                exc,
                exc_info=exc,
                extra={"action": "worker.stream_failed", "worker": self.worker_id},
            )
            wake()  # the worker's next take raises, and the worker stops

    def _read_until_closed(self, wake: Callable[[], None]) -> None:
        failures = 0
        while not self._closing.is_set():
            room = self._wait_for_room()
            if room == 0:
                continue
            try:
                deliveries = self.reader.read(room, self.block)
                if self._keep(deliveries):
                    wake()
            except Exception as exc:
                failures += 1
                self._read_failed(exc, read_pause(failures))
                continue
            failures = 0

    def _read_failed(self, exc: Exception, pause: float) -> None:
        # A store or Redis error is expected now and then; anything else is a bug, logged with
        # its traceback, and the reader goes on all the same: a worker whose reader died would
        # look alive while it ran nothing.
        log.warning(
            "cannot read the job streams, again in %.1fs: %s",
            pause,
            exc,
            exc_info=None if isinstance(exc, ChronoqError) else exc,
            extra={"action": "worker.stream_error", "worker": self.worker_id},
        )
        self._closing.wait(pause)

    def _keep(self, deliveries: list[Delivery]) -> bool:
        """Buffer what was read but not already here; whether anything new came."""
        with self._room:
            new = [d for d in deliveries if _entry(d) not in self._have]
            self._buffer.extend(new)
            self._have.update(_entry(d) for d in new)
        return bool(new)

    def _wait_for_room(self) -> int:
        with self._room:
            self._room.wait_for(
                lambda: self._holding() < self.prefetch or self._closing.is_set(),
                timeout=self.block,
            )
            return 0 if self._closing.is_set() else max(0, self.prefetch - self._holding())

    def _holding(self) -> int:
        return len(self._buffer) + len(self._held)

    def _check_reader(self) -> None:
        if self._failure is not None:
            raise RuntimeError("the stream reader thread stopped") from self._failure

    # -- confirming -----------------------------------------------------------------------

    def _next_entries(self, limit: int) -> list[Delivery]:
        now = self._monotonic()
        entries: list[Delivery] = []
        with self._room:
            while self._held and self._held[0].at <= now and len(entries) < limit:
                entries.append(heapq.heappop(self._held).delivery)
            while self._buffer and len(entries) < limit:
                entries.append(self._buffer.popleft())
        return entries

    def _confirm(self, entries: list[Delivery]) -> IdClaim:
        params = JobClaimIdsParams(
            [JobLeaseRef(entry.job_id, entry.token) for entry in entries],
            self.worker_id,
            leases=self._leases,
            max_attempts=self._max_attempts,
            default_max_attempts=self._default_max_attempts,
        )
        try:
            return self.store.job_claim_ids(params)
        except BaseException:
            # Kept, and asked again at the next take: the worker backs off on the error (the
            # database is away, say) as it does when a claim of the jobs table fails.
            self._hold([(entry, 0.0) for entry in entries])
            raise

    def _settle(self, entries: list[Delivery], claim: IdClaim) -> list[Job]:
        """Acknowledge what is decided, hold what must be asked again."""
        claimed = {job.id for job in claim.jobs}
        gone = set(claim.gone)
        done = [e for e in entries if e.job_id in claimed or e.job_id in gone]
        busy = set(claim.busy)
        again: list[tuple[Delivery, float]] = []
        for entry in entries:
            run_at = claim.early.get(entry.job_id)
            if entry.job_id in busy:
                times = self._busy[_entry(entry)] = self._busy.get(_entry(entry), 0) + 1
                again.append((entry, busy_wait(times)))
                continue
            self._busy.pop(_entry(entry), None)
            if run_at is not None:
                again.append((entry, max(0.0, (run_at - claim.db_now).total_seconds())))
        self._hold(again)
        self._let_go(e for e in entries if e.job_id not in busy and e.job_id not in claim.early)
        if done:
            self._ack(done)
        return claim.jobs

    def _ack(self, entries: list[Delivery]) -> None:
        try:
            self.reader.ack(entries)
        except ChronoqError as exc:
            # An unacknowledged entry is taken over later and dropped by the claim: no harm.
            log.warning("cannot acknowledge %d stream entries: %s", len(entries), exc)

    def _hold(self, entries: list[tuple[Delivery, float]]) -> None:
        now = self._monotonic()
        with self._room:
            for entry, wait in entries:
                heapq.heappush(self._held, _Held(now + wait, entry))

    def _let_go(self, entries: Iterable[Delivery]) -> None:
        with self._room:
            self._have.difference_update(_entry(entry) for entry in entries)

    def _next_held_in(self) -> float | None:
        with self._room:
            if not self._held:
                return None
            return max(0.0, self._held[0].at - self._monotonic())
