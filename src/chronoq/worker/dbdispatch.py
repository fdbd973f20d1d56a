"""The default job source: claim due rows from the jobs table.

```
  take(n) ── rescue expired leases (every rescue_interval) ──────────────► store
          ── job_claim_with_wakeup(n, queues, task settings) ────────────► store
          ◄─ jobs + the database's "next run_at / next lease expiry"
  wake-ups: a thread on the store's change listener (LISTEN/NOTIFY, SQLite's data_version)
```
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from chronoq.core.jobs import Claim, Job
from chronoq.errors import StoreError
from chronoq.scheduler.services import LeaseRescuer
from chronoq.storage.base import JobClaimParams, JobLeaseRef
from chronoq.worker.source import Taken

if TYPE_CHECKING:
    from chronoq.observability.events import Observers
    from chronoq.runtime import Runtime

log = logging.getLogger("chronoq.worker")
LISTEN_SLICE = 0.5


class DbJobSource:
    """Claims from `runtime.store` for `worker_id`, serving `queues` with the app's task settings
    (lease and max_attempts per task are applied in the claim's own statement)."""

    def __init__(
        self,
        runtime: Runtime,
        worker_id: str,
        queues: Sequence[str],
        events: Observers,
        *,
        rescue_interval: float = 5.0,
        poll_interval: float = 5.0,
    ) -> None:
        self.store = runtime.store
        self.worker_id = worker_id
        self.poll_interval = poll_interval
        self._params = JobClaimParams(
            list(queues),
            1,
            worker_id,
            leases={name: task.lease for name, task in runtime.tasks.items()},
            max_attempts={name: task.max_attempts for name, task in runtime.tasks.items()},
            default_max_attempts=runtime.config.default_max_attempts,
        )
        self._rescuer = LeaseRescuer(runtime, rescue_interval, events, by=worker_id)
        self._next_rescue = 0.0
        self._closing = threading.Event()
        self._listener: threading.Thread | None = None

    def start(self, wake: Callable[[], None]) -> None:
        self._listener = threading.Thread(
            target=self._listen, args=(wake,), name="chronoq-listen", daemon=True
        )
        self._listener.start()

    def close(self) -> None:
        self._closing.set()
        if self._listener is not None:
            self._listener.join(timeout=2.0)

    def take(self, limit: int) -> Taken:
        if time.monotonic() >= self._next_rescue:
            self._rescue()
        claim: Claim = self.store.job_claim_with_wakeup(replace(self._params, limit=limit))
        if len(claim.jobs) == limit:
            return Taken(claim.jobs)
        return self._short(claim)

    def give_back(self, jobs: Sequence[Job]) -> set[int]:
        return self.store.job_release_many([JobLeaseRef(job.id, job.lease_token) for job in jobs])

    def _short(self, claim: Claim) -> Taken:
        """A claim that came back short: when is the next job due, on the database clock?"""
        wakeup = claim.wakeup
        expiry = wakeup.next_lease_expiry
        if expiry is not None and expiry <= wakeup.db_now and self._rescue():
            return Taken(claim.jobs, ready=True)
        if wakeup.next_run_at is not None and wakeup.next_run_at <= wakeup.db_now:
            return Taken(claim.jobs, due_in=0.0, contended=True)
        return Taken(claim.jobs, due_in=wakeup.seconds_until_next())

    def _rescue(self) -> int:
        self._next_rescue = time.monotonic() + self._rescuer.interval
        return self._rescuer.rescue()

    def _listen(self, wake: Callable[[], None]) -> None:
        """Thread: turns database change notifications into wake-ups of the claim loop."""
        while not self._closing.is_set():
            try:
                listener = self.store.open_listener()
            except StoreError as exc:
                self._listen_failed("cannot listen for new jobs, polling instead", exc)
                self._closing.wait(self.poll_interval)
                continue
            # A job committed before LISTEN took effect (at start, the first claim runs while
            # this connects; after a reconnect, whatever came meanwhile) notified no one: one
            # claim now finds it, instead of the next poll.
            wake()
            try:
                while not self._closing.is_set():
                    if listener.wait(LISTEN_SLICE):
                        wake()
            except StoreError as exc:
                self._listen_failed("lost the change listener, reconnecting", exc)
            finally:
                listener.close()

    def _listen_failed(self, what: str, exc: StoreError) -> None:
        log.warning(
            "%s: %s", what, exc, extra={"action": "worker.listen_error", "worker": self.worker_id}
        )
