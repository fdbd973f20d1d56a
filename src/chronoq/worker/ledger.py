"""Which jobs a supervised worker process is running, told to its supervisor as it changes.

A job handler can take its whole process down: `os._exit`, a signal, a crash in C code. The
lease would bring such a job back once it expires, but the jobs the process had only claimed
ahead would each lose an attempt they never used, the crash would read as a lease that ran
out, and nothing would run the jobs again until then. So a worker under a supervisor writes a
line of JSON to a pipe each time the set of handlers it runs changes:

```
{"worker": "host:pid:abc123"}     once, at start: the id its claims carry
{"started": [[id, token], ...]}   handlers about to run
{"ended": [[id, token], ...]}     handlers done, or claimed jobs given back
```

When the process dies, the supervisor reads the pipe to its end, ends the process's database
sessions, and asks the store which jobs that worker id still holds. (A claim the process sent
just before it died may still be executing on the server, which would commit it after that
question; ended, it is rolled back: see `ProcessSessionsEndParams`.) Those it had started
failed with the crash: they retry after their task's backoff, or go dead on their last attempt.
The others were only claimed: they are given back without using an attempt. The store, not the
pipe, says what was claimed, so a process that dies while a claim's answer is on its way leaves
nothing behind; every write is fenced by the lease token the store returned, so a job reported
or rescued meanwhile is left alone.

A "started" line is written before the handlers it names run, so a crash can never count a
running job as waiting. An "ended" line is written as soon as the store has the attempt's
result, so the supervisor does not name a job the process had finished among those it died
running, nor excuse a crash that no job caused. A "started" id whose "ended" never arrived
(the process died between the store's answer and the line) only makes the supervisor try a
fenced write that the store refuses.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.observability.events import (
    AttemptsEnded,
    JobsReleased,
    JobsStarted,
    Subscription,
    WorkerStarted,
)
from chronoq.storage.base import (
    JobFinishParams,
    JobLeaseRef,
    JobListParams,
    ProcessSessionsEndParams,
)

if TYPE_CHECKING:
    from chronoq.storage.base import JobStore

log = logging.getLogger("chronoq.supervisor")
LEDGER_FD_ENV = "CHRONOQ_LEDGER_FD"
# The error a crashed attempt records, and the most a job that crashed a process before waits
# to run again (seconds; see `_crash_result`).
CRASHED = "WorkerCrashed"
CRASH_SPREAD = 2.0


class JobLedger:
    """The worker's side: writes its holdings to the supervisor's pipe (a no-op without one)."""

    def __init__(self, fd: int | None = None) -> None:
        self._fd = fd

    @classmethod
    def from_environment(cls) -> JobLedger:
        """The pipe the supervisor passed down, if any. The variable is removed so that
        processes the jobs start do not write to it."""
        value = os.environ.pop(LEDGER_FD_ENV, "")
        if not value.isdigit():
            return cls(None)
        fd = int(value)
        try:
            os.set_inheritable(fd, False)
        except OSError:
            return cls(None)
        return cls(fd)

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        """As an observer of its worker: what it starts, and what it holds no longer."""
        if self._fd is None:
            return ()
        return (
            Subscription(WorkerStarted, lambda event: self.hello(event.worker_id)),
            Subscription(JobsStarted, lambda event: self.started(event.jobs)),
            Subscription(AttemptsEnded, lambda event: self.ended(e.job for e in event.ends)),
            Subscription(JobsReleased, lambda event: self.ended(event.jobs)),
        )

    def hello(self, worker_id: str) -> None:
        if self._fd is not None:
            self._write({"worker": worker_id})

    def started(self, jobs: Sequence[Job]) -> None:
        if self._fd is not None and jobs:
            self._write({"started": [[job.id, job.lease_token] for job in jobs]})

    def ended(self, jobs: Iterable[Job]) -> None:
        """Held no longer: the store has their results, or has them back unstarted."""
        if self._fd is not None and (ended := [[job.id, job.lease_token] for job in jobs]):
            self._write({"ended": ended})

    def _write(self, record: dict[str, object]) -> None:
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._fd, data) :]  # type: ignore[arg-type]
        except OSError:
            # The supervisor is gone; the orphan watch stops this worker soon.
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class LedgerReader:
    """The supervisor's side: what one child is running, rebuilt from the lines it wrote."""

    def __init__(self) -> None:
        self.worker_id: str | None = None
        self.running: dict[int, int] = {}  # job id -> the lease token it runs under
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if line:
                self._apply(line)

    def _apply(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return  # a child killed mid-write leaves at most one torn line, its last
        self.worker_id = record.get("worker", self.worker_id)
        # A line's ends are older than its starts; and an end names its token, so a late one
        # cannot end the job's next run.
        for job_id, token in record.get("ended", ()):
            if self.running.get(job_id) == token:
                del self.running[job_id]
        for job_id, token in record.get("started", ()):
            self.running[job_id] = token


@dataclass(frozen=True, slots=True)
class Orphans:
    """How a child process died, the worker id its claims carry, and the handlers it ran."""

    pid: int
    code: int
    worker_id: str | None
    running: frozenset[tuple[int, int]]  # (job id, lease token) of each handler it ran


def describe_exit(code: int) -> str:
    """A child's end, from its `wait` status: "was killed by SIGKILL", "exited with code 1"."""
    return f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def settle_orphans(store: JobStore, orphans: Orphans) -> tuple[set[int], set[int]]:
    """Settle the jobs a dead child's worker still holds; returns (failed, released) ids."""
    if orphans.worker_id is None:
        return set(), set()  # it died before its first claim
    _end_sessions(store, orphans.worker_id)
    held = _held_by(store, orphans.worker_id)
    message = (
        f"the worker process (pid {orphans.pid}) {describe_exit(orphans.code)} while this job ran"
    )
    failures = [
        _crash_result(job, message, orphans.worker_id)
        for job in held
        if (job.id, job.lease_token) in orphans.running
    ]
    waiting = [
        JobLeaseRef(job.id, job.lease_token)
        for job in held
        if (job.id, job.lease_token) not in orphans.running
    ]
    failed = store.job_finish_many(failures) if failures else set()
    released = store.job_release_many(waiting) if waiting else set()
    log.info(
        "settled the jobs of worker %s: attempts failed %s, given back %s",
        orphans.worker_id,
        sorted(failed),
        sorted(released),
        extra={
            "action": "supervisor.settled",
            "worker": orphans.worker_id,
            "failed": sorted(failed),
            "released": sorted(released),
        },
    )
    return failed, released


def _end_sessions(store: JobStore, worker_id: str) -> None:
    """No statement of the dead worker may commit after its holdings are read."""
    left = store.process_sessions_end(ProcessSessionsEndParams(worker_id))
    if left:
        log.warning(
            "%d database session(s) of worker %s outlived it; a claim of theirs that commits "
            "now waits for its lease",
            left,
            worker_id,
            extra={"action": "supervisor.sessions_left", "worker": worker_id, "sessions": left},
        )


def _held_by(store: JobStore, worker_id: str) -> list[Job]:
    held: list[Job] = []
    before: int | None = None
    while page := store.job_list(
        JobListParams(statuses=[JobStatus.RUNNING], worker=worker_id, limit=1000, before_id=before)
    ):
        held.extend(page)
        before = page[-1].id
    return held


def _crash_result(job: Job, message: str, worker_id: str) -> JobFinishParams:
    """The crashed attempt's failure. After its first crash the job runs again at once, in its
    place in line, as it would after the lease rescue: work a crash interrupted does not wait
    behind the backlog that fell due after it. A job that crashed a process before may be the
    poison itself, and so may any job that ran beside it: each is retried after its own random
    delay of up to CRASH_SPREAD seconds instead, so they are not claimed together again. In
    their place in line, the poison and its neighbours would be claimed into one process again
    and again, and every crash would spend an attempt of each, until all of them were dead."""
    dead = job.out_of_attempts
    error = {
        "attempt": job.attempts,
        "error": CRASHED,
        "message": message,
        "traceback": "",
        "worker": worker_id,
        "outcome": "dead" if dead else "retry",
    }
    outcome = Outcome.DEAD if dead else Outcome.RETRY
    if _crashed_before(job):
        delay = random.uniform(0.0, CRASH_SPREAD)
        return JobFinishParams(job.id, job.lease_token, outcome, retry_delay=delay, error=error)
    return JobFinishParams(job.id, job.lease_token, outcome, error=error, keep_place=True)


def _crashed_before(job: Job) -> bool:
    return any(error.get("error") == CRASHED for error in job.errors)
