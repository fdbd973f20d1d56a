"""The worker among its peers in the fleet registry (`chronoq.fleet`): its own record, kept
fresh by a beacon while it runs, and the hand-off of claimed jobs whose task only other live
workers know (a rolling deploy: see `Peers.hand_off`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chronoq.core.jobs import Job
from chronoq.errors import ChronoqError
from chronoq.fleet.beacon import Beacon, FleetLookup, this_process
from chronoq.fleet.records import ProcessInfo
from chronoq.observability.events import JobsHandedOff, Observers
from chronoq.storage.base import JobHandOffParams, JobLeaseRef
from chronoq.worker.attempts import Holdings

if TYPE_CHECKING:
    from chronoq.runtime import Runtime
    from chronoq.worker.options import WorkerOptions

log = logging.getLogger("chronoq.worker")


class Peers:
    """The worker's record (`beacon`) and what it reads of the others' (`fleet`)."""

    def __init__(
        self,
        runtime: Runtime,
        worker_id: str,
        queues: list[str],
        options: WorkerOptions,
        holdings: Holdings,
        events: Observers,
        io: Callable[..., Awaitable[Any]],
    ) -> None:
        self.runtime = runtime
        self.worker_id = worker_id
        self.options = options
        self.holdings = holdings
        self.events = events
        self._io = io
        self.fleet = FleetLookup(lambda: runtime.store, max_age=1.0)
        self.beacon = Beacon(runtime.store, self._describe, interval=options.beat_interval)
        self._info = this_process(
            worker_id,
            "worker",
            runtime.tasks.values(),
            queues=queues,
            concurrency=options.concurrency,
        )

    def _describe(self) -> ProcessInfo:
        """The fleet registry's record of this worker, as of now (the beacon's thread)."""
        return replace(self._info, running=self.holdings.running)

    async def leave(self) -> None:
        """Mark this worker stopped; bounded, so a database that is gone cannot hold up the
        exit (the record then expires by itself)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.to_thread(self.beacon.stop), 5.0)

    async def hand_off(self, jobs: list[Job]) -> list[Job]:
        """During a rolling deploy an old worker claims jobs of a task only the new code knows.
        Those a live worker serving their queue knows are given back, unstarted and without
        using an attempt, due again a little later so this worker does not claim them again at
        once; the rest are returned to run (a task no live worker knows is dead-lettered, as
        it can never run). Returns the jobs to hold."""
        tasks = self.runtime.tasks
        strangers = [job for job in jobs if job.task not in tasks]
        if not strangers:
            return jobs
        known_elsewhere: list[Job] = await self._io(self._known_elsewhere, strangers)
        if not known_elsewhere:
            return jobs
        delay = self.options.hand_off_delay
        refs = [JobLeaseRef(job.id, job.lease_token) for job in known_elsewhere]
        handed: set[int] = await self._io(
            self.runtime.store.job_hand_off_many, JobHandOffParams(refs, delay)
        )
        self.events.emit(JobsHandedOff(self.worker_id, known_elsewhere, frozenset(handed), delay))
        gone = {job.id for job in known_elsewhere}
        return [job for job in jobs if job.id not in gone]

    def _known_elsewhere(self, jobs: list[Job]) -> list[Job]:
        """The jobs whose task a live worker other than this one knows and runs on their
        queue (I/O thread). An unreadable registry hands nothing off."""
        try:
            return [
                job
                for job in jobs
                if self.fleet.runs_task(job.task, job.queue, besides=self.worker_id)
            ]
        except ChronoqError as exc:
            log.warning(
                "could not read the fleet registry about unknown task(s): %s",
                exc,
                extra={"action": "worker.fleet_unreadable", "worker": self.worker_id},
            )
            return []
