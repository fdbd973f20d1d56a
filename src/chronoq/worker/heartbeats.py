"""Keeps the leases of the jobs a worker holds, in batches.

Each attempt is due a heartbeat a third of the way into its lease; jobs due within half that
interval go along with the first one due, so one `job_heartbeat_many` renews many leases. A
refused heartbeat means the lease had lapsed and the job was rescued: the attempt is marked
lost (its handler sees `JobLost` on its next heartbeat or completion, and its result will be
discarded) and a `LeaseLost` event says so.

Each heartbeat carries the progress its attempts reported since their last one
(`JobContext.progress`), stored only while the attempt still holds the lease (the same fence).

The same heartbeat tells which held jobs were cancelled while they ran (a cancel keeps the
attempt's token): the attempt is marked cancelled, its async handler is cancelled at once (a
sync one sees `ctx.cancelled`), and an `AttemptCancelled` event says so. Learning of a cancel
costs no query of its own, and it reaches the worker within a third of the job's lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Sequence

from chronoq.errors import StoreError
from chronoq.observability.eventlog import batch_extra
from chronoq.observability.events import AttemptCancelled, LeaseLost
from chronoq.storage.base import JobHeartbeatResult
from chronoq.worker.attempts import Attempt, Shared

log = logging.getLogger("chronoq.worker")
IDLE_WAIT = 60.0


class LeaseKeeper:
    def __init__(self, shared: Shared) -> None:
        self.store = shared.store
        self.io = shared.io
        self.holdings = shared.holdings
        self.events = shared.events
        self.worker_id = shared.worker_id
        self.wake = asyncio.Event()
        # When the loop next wakes by itself (monotonic seconds): claims due later need not
        # wake it, it will see them then.
        self._next_beat = -math.inf

    def held_more(self, attempts: Sequence[Attempt]) -> None:
        """Attempts were claimed: wake the loop if the first of them is due a heartbeat before
        it would wake by itself (rescanning the holdings at every claim costs a few calls per
        job held)."""
        if attempts and min(a.heartbeat_due for a in attempts) < self._next_beat:
            self.wake.set()

    async def run(self) -> None:
        """The loop: runs for the worker's whole life. `wake` it when jobs were claimed."""
        while True:
            due = [a.heartbeat_due for a in self.holdings if _held(a)]
            now = time.monotonic()
            pause = max(0.0, min(due) - now) if due else IDLE_WAIT
            self._next_beat = now + pause
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), pause)
            self._next_beat = -math.inf
            await self.beat()

    async def beat(self) -> None:
        """Heartbeat every held attempt that is due, or nearly; attempts with progress to
        report ride along with a batch that goes anyway (they cost no round trip of their
        own, and their progress waits for their own beat otherwise)."""
        now = time.monotonic()
        held = [a for a in self.holdings if _held(a)]
        batch = [a for a in held if _due_soon(a, now)]
        if not batch:
            return
        due = set(map(id, batch))
        batch += [a for a in held if id(a) not in due and a.ctx.unsent_progress() is not None]
        unsent = {a.job.id: report for a in batch if (report := a.ctx.unsent_progress())}
        progress = {job_id: report[1] for job_id, report in unsent.items()}
        try:
            result: JobHeartbeatResult = await self.io(
                self.store.job_heartbeat_many, [a.ctx.ref for a in batch], progress
            )
        except StoreError as exc:
            extra = batch_extra("worker.heartbeat_error", self.worker_id, [a.job for a in batch])
            log.error("heartbeat failed: %s", exc, extra=extra)
            return
        for attempt in batch:
            attempt.heartbeat_due = now + attempt.job.lease_seconds / 3
            if attempt.job.id in result.cancelled:
                self._cancelled(attempt)
            elif attempt.job.id not in result.renewed:
                self._refused(attempt)
            elif attempt.job.id in unsent:
                attempt.ctx.progress_sent(unsent[attempt.job.id][0])

    def _cancelled(self, attempt: Attempt) -> None:
        """The job was cancelled while this attempt held it: stop the handler. One whose result
        is on its way has nothing left to stop (the reporter finds the cancel)."""
        attempt.ctx.mark_cancelled()
        if self.holdings.owned.get(attempt.job.id) is not attempt or attempt.reporting:
            return
        task = attempt.task if attempt.on_loop else None
        if task is not None:
            task.cancel()
        started = attempt.task is not None
        self.events.emit(AttemptCancelled(self.worker_id, attempt.job, task is not None, started))

    def _refused(self, attempt: Attempt) -> None:
        # A job no longer held, or whose result is on its way, may just have crossed its
        # report: the refusal then says nothing about its lease.
        if attempt.job.id in self.holdings.owned and not attempt.reporting:
            attempt.ctx.lost = True
            self.events.emit(LeaseLost(self.worker_id, attempt.job))


def _held(attempt: Attempt) -> bool:
    """Still this attempt's to heartbeat: neither lost nor cancelled."""
    return not (attempt.ctx.lost or attempt.ctx.cancelled)


def _due_soon(attempt: Attempt, now: float) -> bool:
    """Due within half its interval: renewed with the batch now, not alone a moment later."""
    return attempt.heartbeat_due - attempt.job.lease_seconds / 6 <= now
