"""A chaos worker process: the workload's app in a `chronoq.Worker`, appending what it sees
(claims, accepted and refused results and heartbeats) to a JSONL history, one flushed line per
event, so a SIGKILL loses nothing already written."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

import chronoq
from chronoq.core.jobs import Job, JobProgress, Outcome
from chronoq.storage.base import IdClaim, JobClaimIdsParams, JobHeartbeatResult, JobLeaseRef
from chronoq.testing import WorkerSignals
from chronoq.worker.ledger import JobLedger
from tests.chaos.workload import app


class HistorySignals(WorkerSignals):
    def __init__(self, sink: IO[str]) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def write(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._sink.write(json.dumps({"pid": self._pid, **event}) + "\n")
            self._sink.flush()

    def claimed(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self.write({"event": "claim", "job": job.id, "token": job.lease_token})

    def finished(self, job: Job, outcome: Outcome, accepted: bool) -> None:
        self.write(
            {
                "event": "finish",
                "job": job.id,
                "token": job.lease_token,
                "outcome": str(outcome),
                "accepted": accepted,
            }
        )


def record_heartbeats(signals: HistorySignals) -> None:
    """Log which heartbeats the store accepted, by (job, token)."""
    store = app.store
    original = store.job_heartbeat_many

    def logged(
        refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress] | None = None
    ) -> JobHeartbeatResult:
        # Written before the call: every line appended before it (a claim by another process,
        # say) happened before this heartbeat reached the database.
        signals.write({"event": "heartbeat_send", "refs": [[r.id, r.lease_token] for r in refs]})
        accepted = original(refs, progress)
        for ref in refs:
            signals.write(
                {
                    "event": "heartbeat",
                    "job": ref.id,
                    "token": ref.lease_token,
                    "accepted": ref.id in accepted.renewed,
                }
            )
        return accepted

    store.job_heartbeat_many = logged  # type: ignore[method-assign]


def record_confirms(signals: HistorySignals) -> None:
    """Tiered dispatch: log which stream entries, by (job, staged token), started an attempt;
    one staged token starting two attempts would be a timer fired twice."""
    store = app.store
    original = store.job_claim_ids

    def logged(params: JobClaimIdsParams) -> IdClaim:
        claim = original(params)
        claimed = {job.id for job in claim.jobs}
        signals.write(
            {
                "event": "confirm",
                "refs": [[r.id, r.lease_token] for r in params.refs],
                "claimed": sorted({(r.id, r.lease_token) for r in params.refs if r.id in claimed}),
            }
        )
        return claim

    store.job_claim_ids = logged  # type: ignore[method-assign]


def main() -> int:
    with open(os.environ["CHAOS_HISTORY"], "a", encoding="utf-8") as sink:
        signals = HistorySignals(sink)
        record_heartbeats(signals)
        if app.config.dispatch == "tiered":
            record_confirms(signals)
        options = chronoq.WorkerOptions(
            queues=["chaos", "ticks"], concurrency=8, rescue_interval=1.0, poll_interval=0.5
        )
        # Under tests.chaos.supervised_main, the pipe its supervisor reads; else no ledger.
        worker = chronoq.Worker(app, options, [signals], ledger=JobLedger.from_environment())
        # Written once the store is open (the runner injects no fault before every worker has
        # said so), with the process's own clock, which the clock-skew scenario sets 5 minutes
        # off.
        signals.write({"event": "start", "wall": time.time()})
        worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
