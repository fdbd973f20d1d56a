"""Reports how attempts ended, in batches, fenced by each attempt's lease token.

Results queue up as handlers return; one loop sends everything queued so far in one
`job_finish_many` and retries, backing off, while the store is unreachable (a database
restart is an ordinary event for a long-running worker). The store answers which results it
accepted: the others named a stale token (the job was rescued and claimed again elsewhere), so
they are discarded, and the `AttemptsEnded` event says which.

A refused result may also belong to a job cancelled while its attempt ran, when the handler
ended before a heartbeat could tell (the two crossed). The reporter asks the store about the
refused ones only (a rare path, no query on the common one) and records those as cancelled
attempts, not as lost ones.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from chronoq.core.jobs import Job, Outcome
from chronoq.errors import JobCancelled, StoreError
from chronoq.observability.eventlog import batch_extra
from chronoq.observability.events import AttemptEnd, AttemptsEnded
from chronoq.storage.base import JobFinishParams, JobLeaseRef
from chronoq.worker.attempts import Shared

log = logging.getLogger("chronoq.worker")
BATCH_LIMIT = 1000
# A sync attempt that timed out is reported just before its process exits, and its retry is
# not due sooner than this: nobody else may start the job while its stuck thread still exists.
STUCK_RETRY_FLOOR = 1.0
CANCELLED_ERROR = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"


@dataclass(slots=True)
class Result:
    job: Job
    params: JobFinishParams


class Inbox:
    """The results waiting to be reported, on the worker's event loop. Queuing one is an
    append and a count (an `asyncio.Queue` costs about ten Python calls per item: the worker
    puts one per job); the reporter waits for the first of a batch, and shutdown waits until
    every result put has been reported (`join`)."""

    __slots__ = ("_items", "_joiners", "_unreported", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Result] = collections.deque()
        # Put and not yet reported: queued, or in the batch being sent.
        self._unreported = 0
        self._waiter: asyncio.Future[None] | None = None
        self._joiners: list[asyncio.Future[None]] = []

    def __len__(self) -> int:
        """Results queued and not yet taken for a batch."""
        return len(self._items)

    def put(self, job: Job, params: JobFinishParams) -> None:
        """Queue a result for the next batch (the queue is unbounded: this never waits)."""
        self._items.append(Result(job, params))
        self._unreported += 1
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self, limit: int) -> list[Result]:
        """The results queued, up to `limit` of them, once there is one."""
        items = self._items
        while not items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if len(items) <= limit:
            batch = list(items)
            items.clear()
            return batch
        return [items.popleft() for _ in range(limit)]

    def reported(self, count: int) -> None:
        """`count` results taken are reported (or given up on)."""
        self._unreported -= count
        if self._unreported <= 0:
            for joiner in self._joiners:
                if not joiner.done():
                    joiner.set_result(None)
            self._joiners.clear()

    async def join(self) -> None:
        """Wait until every result put is reported."""
        while self._unreported > 0:
            joiner = asyncio.get_running_loop().create_future()
            self._joiners.append(joiner)
            await joiner


class Completer:
    """The reporting side of one worker."""

    def __init__(self, shared: Shared, stop_now: asyncio.Event) -> None:
        self.store = shared.store
        self.io = shared.io
        self.holdings = shared.holdings
        self.events = shared.events
        self.worker_id = shared.worker_id
        self.stop_now = stop_now
        self.results = Inbox()
        # The worker queues a result a job: the inbox's own method, without a call in between.
        self.put: Callable[[Job, JobFinishParams], None] = self.results.put
        # Called after each batch is reported: the results may free room for claims.
        self.on_reported: Callable[[], None] = lambda: None
        # Results of timed-out sync attempts, reported last (see STUCK_RETRY_FLOOR).
        self._held_back: list[Result] = []

    def hold_back(self, job: Job, params: JobFinishParams) -> None:
        """Report this attempt only at shutdown, just before the process exits."""
        if params.outcome == Outcome.RETRY:
            delay = max(params.retry_delay, STUCK_RETRY_FLOOR)
            params = dataclasses.replace(params, retry_delay=delay)
        self._held_back.append(Result(job, params))

    def completed_in_transaction(self, job: Job) -> None:
        """The handler completed its job in its own transaction: nothing to send."""
        attempt = self.holdings.disown(job)
        duration = attempt.elapsed if attempt is not None else 0.0
        end = AttemptEnd(job, Outcome.DONE, True, duration)
        self.events.emit(AttemptsEnded(self.worker_id, (end,)))

    async def run(self) -> None:
        """The loop: runs for the worker's whole life."""
        while True:
            batch = await self.results.take(BATCH_LIMIT)
            try:
                await self._flush(batch)
            finally:
                self.results.reported(len(batch))

    async def report_all(self, timeout: float) -> None:
        """At shutdown: wait for what is queued, then send what was held back."""
        await self._drain(timeout)
        if self._held_back:
            for result in self._held_back:
                self.results.put(result.job, result.params)
            self._held_back.clear()
            await self._drain(timeout)

    async def _drain(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.results.join(), timeout=timeout)
        except TimeoutError:
            log.error(
                "gave up reporting %d result(s); their leases will expire",
                len(self.results),
                extra={"action": "worker.report_abandoned", "worker": self.worker_id},
            )

    async def _flush(self, batch: list[Result]) -> None:
        accepted = await self._send(batch)
        # Accepted ids are ids of the batch: as many as its results, and none was refused.
        refused = (
            []
            if len(accepted) == len(batch)
            else [result for result in batch if result.params.id not in accepted]
        )
        if refused:
            accepted |= await self._record_cancelled(refused)
        self.events.emit(AttemptsEnded(self.worker_id, self._ends(batch, accepted)))
        self.on_reported()

    async def _send(self, batch: list[Result]) -> set[int]:
        """The ids the store accepted; none when it cannot be reached before an immediate
        stop (their leases then expire, and the rescuer decides)."""
        failures = 0
        while True:
            try:
                accepted: set[int] = await self.io(
                    self.store.job_finish_many, [r.params for r in batch]
                )
                return accepted
            except StoreError as exc:
                failures += 1
                extra = batch_extra("worker.report_error", self.worker_id, [r.job for r in batch])
                if self.stop_now.is_set():
                    log.error(
                        "could not report %d result(s) before stopping: %s",
                        len(batch),
                        exc,
                        extra=extra,
                    )
                    return set()
                pause = min(5.0, 0.05 * 2**failures)
                log.error(
                    "could not report results, retrying in %.1fs: %s", pause, exc, extra=extra
                )
                await asyncio.sleep(pause)

    async def _record_cancelled(self, refused: list[Result]) -> set[int]:
        """Of the refused results, record those of jobs cancelled while their attempt ran as
        cancelled attempts (the job stays cancelled); the ids recorded. The others are lost."""
        try:
            ids: set[int] = await self.io(
                self.store.job_cancelled_among,
                [JobLeaseRef(r.params.id, r.params.lease_token) for r in refused],
            )
        except StoreError as exc:
            extra = batch_extra("worker.report_error", self.worker_id, [r.job for r in refused])
            log.error("could not tell cancelled jobs from lost ones: %s", exc, extra=extra)
            return set()
        late = [result for result in refused if result.params.id in ids]
        for result in late:
            result.params = cancelled_late(result.params, self.worker_id)
        return await self._send(late) if late else set()

    def _ends(self, batch: list[Result], accepted: set[int]) -> list[AttemptEnd]:
        """How each attempt ended, built in one loop with the holdings' `disown` bound once
        (not a method call of this class a job); a duration runs from the attempt's start to
        the batch's report (one clock reading)."""
        now = time.monotonic()
        disown = self.holdings.disown
        ends = []
        for result in batch:
            attempt = disown(result.job)
            params = result.params
            duration = now - attempt.started if attempt is not None else 0.0
            end = AttemptEnd(
                result.job,
                params.outcome,
                params.id in accepted,
                duration,
                params.error,
                params.retry_delay,
            )
            ends.append(end)
        return ends


def cancelled_late(params: JobFinishParams, worker_id: str) -> JobFinishParams:
    """A result refused because the job was cancelled while its attempt ran, as the cancelled
    end of that attempt: what the handler reported is kept in the message, and discarded."""
    if params.outcome == Outcome.CANCELLED:
        return params
    message = f"the job was cancelled while this attempt ran; its result ({params.outcome}) "
    message += "was discarded"
    error = {"attempt": 0, "traceback": "", "worker": worker_id} | (params.error or {})
    error |= {"error": CANCELLED_ERROR, "message": message, "outcome": "cancelled"}
    return dataclasses.replace(params, outcome=Outcome.CANCELLED, retry_delay=0.0, error=error)
