"""What a handler gets as its first argument when it asks for one."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chronoq.config import DEFAULT_OUTPUT_LIMIT
from chronoq.core.jobs import Job, JobProgress
from chronoq.core.validate import encode_output
from chronoq.errors import ChronoqError, JobCancelled, JobLost
from chronoq.observability.logs import HANDLER_LOGGER, JobLogAdapter, job_fields
from chronoq.storage.base import JobLeaseRef

if TYPE_CHECKING:
    from chronoq.storage.base import JobStore


@dataclass(eq=False)
class JobContext:
    """The running job: identity, attempt, fencing token, and ways to keep or finish it.

    `lease_token` is the fencing token of this attempt. Pass it (or `id`) to your own systems to
    make the effect idempotent, or finish the job in your own database transaction with
    `complete_in(conn)` so that your writes and the completion commit together.

    What the handler returns is the job's output (see `App.wait`); `progress(fraction, note)`
    reports how far it has come, carried to the store by the next heartbeat of its lease.

    Cancelling a running job reaches its worker with the next heartbeat of its lease. An async
    handler is then cancelled (`asyncio.CancelledError` at its current `await`); a sync one, whose
    thread cannot be stopped, sees `cancelled` turn True, and `raise_if_cancelled()` raise
    `JobCancelled`. Either way the attempt ends cancelled, without a retry, and whatever the
    handler returns after the cancel is discarded.
    """

    job: Job
    worker_id: str
    store: JobStore
    lost: bool = False
    # Told "heartbeat" or "finish" when a write of this context is refused for a stale token.
    on_fenced: Callable[[str], None] | None = None
    # The largest output `complete_in` stores (JSON, bytes); the worker passes its own.
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    completed_in_transaction: bool = field(default=False, init=False)
    # The last progress reported and its number (one more per report), read by the lease
    # keeper: one tuple, so a reader on another thread never sees half of a report.
    _reported: tuple[int, JobProgress] | None = field(default=None, init=False, repr=False)
    _progress_sent: int = field(default=0, init=False, repr=False)
    # A plain flag, not a threading.Event (which costs about 2 µs per job to build): the lease
    # keeper sets it on the loop, a sync handler reads it in its thread.
    _cancel_seen: bool = field(default=False, init=False, repr=False)

    @functools.cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry the job's id, task, queue and attempt, beside any
        `extra` of the call."""
        return JobLogAdapter(logging.getLogger(HANDLER_LOGGER), job_fields(self.job))

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        return self.job.attempts

    @property
    def max_attempts(self) -> int | None:
        return self.job.max_attempts

    @property
    def lease_token(self) -> int:
        return self.job.lease_token

    @property
    def key(self) -> str | None:
        return self.job.key

    @property
    def task(self) -> str:
        return self.job.task

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def payload(self) -> dict[str, Any]:
        return self.job.payload

    @property
    def scheduled_at(self) -> datetime:
        return self.job.run_at

    @property
    def started_at(self) -> datetime | None:
        return self.job.started_at

    @property
    def schedule(self) -> str | None:
        """The schedule that fired this job, if a schedule did."""
        return self.job.schedule

    @property
    def tick(self) -> datetime | None:
        """The tick this job stands for (before jitter): the instant it was due to fire."""
        return self.job.tick

    @property
    def ticks(self) -> int:
        """How many ticks this job stands for: above 1 when missed ticks were coalesced."""
        return self.job.ticks

    @property
    def ref(self) -> JobLeaseRef:
        return JobLeaseRef(self.job.id, self.job.lease_token)

    @property
    def cancelled(self) -> bool:
        """The job was cancelled while this attempt ran: stop, and the attempt ends cancelled
        (any result is discarded). Safe to read from any thread."""
        return self._cancel_seen

    def raise_if_cancelled(self) -> None:
        """Raise JobCancelled if the job was cancelled while this attempt ran: the attempt then
        ends cancelled, with no retry. For sync handlers to call between steps."""
        if self._cancel_seen:
            raise self._cancelled()

    def mark_cancelled(self) -> None:
        """Record that the job was cancelled while this attempt ran (the worker calls it when a
        heartbeat says so). Thread-safe."""
        self._cancel_seen = True

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far the attempt has come: `fraction` of its work done (0 to 1) and an
        optional short `note` ("3 of 8 files", at most 200 characters). Costs no database round
        trip: the worker's next heartbeat of this job's lease carries the latest report (fenced
        by the lease token like the heartbeat), so operators see it within a third of the lease.
        Raises ValueError for a fraction outside 0..1 or a note too long. Safe from any thread."""
        checked = JobProgress.checked(fraction, note)
        number = self._reported[0] + 1 if self._reported is not None else 1
        self._reported = (number, checked)

    @property
    def last_progress(self) -> JobProgress | None:
        """The progress this attempt reported last (stored or not yet)."""
        return self._reported[1] if self._reported is not None else None

    def unsent_progress(self) -> tuple[int, JobProgress] | None:
        """The latest report not yet carried by a heartbeat, with its number (the worker)."""
        reported = self._reported
        if reported is None or reported[0] <= self._progress_sent:
            return None
        return reported

    def progress_sent(self, number: int) -> None:
        """A heartbeat stored the report numbered `number` (the worker)."""
        self._progress_sent = max(self._progress_sent, number)

    def heartbeat(self) -> None:
        """Extend the lease now, with any progress not yet sent. Raises JobLost when another
        worker owns the job, and JobCancelled when the job was cancelled while this attempt
        ran."""
        if self.lost:
            raise self._lost()
        self.raise_if_cancelled()
        unsent = self.unsent_progress()
        progress = {self.job.id: unsent[1]} if unsent is not None else None
        result = self.store.job_heartbeat_many([self.ref], progress)
        if unsent is not None and self.job.id in result.renewed:
            self.progress_sent(unsent[0])
        if self.job.id in result.cancelled:
            self.mark_cancelled()
            raise self._cancelled()
        if self.job.id not in result.renewed:
            self._refused("heartbeat")
            raise self._lost()

    async def heartbeat_async(self) -> None:
        await asyncio.to_thread(self.heartbeat)

    def complete_in(self, conn: Any, output: Any = None) -> None:
        """Mark the job done inside `conn`'s open transaction (psycopg or sqlite3 connection
        to the job's database), with `output` as its output (what the handler then returns is
        not stored). Raises JobLost, so the transaction can roll back, when the lease token is
        stale (JobCancelled when the job is known to be cancelled), and InvalidOutput when
        `output` is not JSON or is over the output limit."""
        output_json = encode_output(self.job.task, output, self.output_limit)
        if not self.store.job_complete_in(conn, self.ref, output_json):
            self._refused("finish")
            raise self._lost()
        self.completed_in_transaction = True

    async def complete_in_async(self, conn: Any, output: Any = None) -> None:
        """`complete_in` for an async psycopg connection."""
        complete = getattr(self.store, "job_complete_in_async", None)
        if complete is None:
            raise ChronoqError("complete_in_async needs a PostgreSQL store")
        output_json = encode_output(self.job.task, output, self.output_limit)
        if not await complete(conn, self.ref, output_json):
            self._refused("finish")
            raise self._lost()
        self.completed_in_transaction = True

    def _refused(self, kind: str) -> None:
        """The store refused a write naming our token: another claim owns the job now, or
        (known from a heartbeat) the job was cancelled."""
        self.raise_if_cancelled()
        self.lost = True
        if self.on_fenced is not None:
            self.on_fenced(kind)

    def _lost(self) -> JobLost:
        return JobLost(f"job {self.job.id} (token {self.job.lease_token}) is no longer ours")

    def _cancelled(self) -> JobCancelled:
        return JobCancelled(f"job {self.job.id} was cancelled while attempt {self.attempt} ran")
