"""What a handler gets as its first argument when it asks for one."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chronoq.core.jobs import Job
from chronoq.errors import ChronoqError, JobLost
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
    """

    job: Job
    worker_id: str
    store: JobStore
    lost: bool = False
    # Told "heartbeat" or "finish" when a write of this context is refused for a stale token.
    on_fenced: Callable[[str], None] | None = None
    completed_in_transaction: bool = field(default=False, init=False)

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

    def heartbeat(self) -> None:
        """Extend the lease now. Raises JobLost when another worker owns the job."""
        if self.lost:
            raise self._lost()
        if self.job.id not in self.store.job_heartbeat_many([self.ref]).renewed:
            self._refused("heartbeat")
            raise self._lost()

    async def heartbeat_async(self) -> None:
        await asyncio.to_thread(self.heartbeat)

    def complete_in(self, conn: Any) -> None:
        """Mark the job done inside `conn`'s open transaction (psycopg or sqlite3 connection
        to the job's database). Raises JobLost, so the transaction can roll back, when the
        lease token is stale."""
        if not self.store.job_complete_in(conn, self.ref):
            self._refused("finish")
            raise self._lost()
        self.completed_in_transaction = True

    async def complete_in_async(self, conn: Any) -> None:
        """`complete_in` for an async psycopg connection."""
        complete = getattr(self.store, "job_complete_in_async", None)
        if complete is None:
            raise ChronoqError("complete_in_async needs a PostgreSQL store")
        if not await complete(conn, self.ref):
            self._refused("finish")
            raise self._lost()
        self.completed_in_transaction = True

    def _refused(self, kind: str) -> None:
        """The store refused a write naming our token: another claim owns the job now."""
        self.lost = True
        if self.on_fenced is not None:
            self.on_fenced(kind)

    def _lost(self) -> JobLost:
        return JobLost(f"job {self.job.id} (token {self.job.lease_token}) is no longer ours")
