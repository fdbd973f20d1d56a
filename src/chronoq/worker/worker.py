"""The worker: claims due jobs, runs them, keeps their leases, and reports how they ended.

```
             wake-ups: a slot frees · NOTIFY / data_version · timer at next run_at or lease expiry
                 │
  claim loop ────┴── job_claim_with_wakeup(free slots + a batch ahead) ───────────► store
      │ one asyncio task per job: async handlers on the loop, sync ones in a thread pool
      ▼
  results queue ── completer: job_finish_many(everything finished so far) ───────► store
  heartbeater ──── job_heartbeat_many(jobs whose lease is a third gone) ─────────► store
```

Every store call runs in a small I/O thread pool so the loop never blocks on the database, and
every write is fenced by the job's lease token: a rejected write means the job was rescued and
claimed again elsewhere (this worker stalled or was cut off); it is counted, logged, and dropped.
Store failures never end the loop: it logs them and backs off, because a database restart is an
ordinary event for a long-running worker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import dataclasses
import functools
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chronoq.core.jobs import Claim, Job, Outcome
from chronoq.errors import ConfigError, Discard, JobTimeout, Retry, StoreError
from chronoq.observability.logs import current_job
from chronoq.storage.base import JobClaimParams, JobFinishParams, JobLeaseRef, JobRescueParams
from chronoq.worker.context import JobContext
from chronoq.worker.ledger import JobLedger
from chronoq.worker.supervisor import EXIT_RETIRED

if TYPE_CHECKING:
    from chronoq.app import App, Task
    from chronoq.observability.metrics import Metrics

log = logging.getLogger("chronoq.worker")
TRACEBACK_LIMIT = 4000
MESSAGE_LIMIT = 2000
# A sync attempt that timed out is reported just before its process exits, and its retry is
# not due sooner than this: nobody else may start the job while its stuck thread still exists.
STUCK_RETRY_FLOOR = 1.0
PULSE_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How a worker runs. `queues=None` serves every queue the app's tasks use."""

    queues: Sequence[str] | None = None
    concurrency: int = 10
    batch_size: int | None = None
    burst: bool = False
    poll_interval: float = 5.0
    rescue_interval: float = 5.0
    shutdown_grace: float = 30.0
    worker_id: str | None = None
    # Exit the process (code 75, for its supervisor to replace it) when the event loop has not
    # run for longer than the leases of all the jobs it holds: an async handler that blocks the
    # loop stalls every job of the process, and none of them is its to finish any more. The
    # command sets it; a program that runs a Worker itself decides for itself.
    exit_when_blocked: bool = False

    def validated(self) -> WorkerOptions:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {self.batch_size}")
        for name in ("poll_interval", "rescue_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive seconds, got {getattr(self, name)}")
        if self.shutdown_grace < 0:
            raise ConfigError(f"shutdown_grace must not be negative, got {self.shutdown_grace}")
        return self


class WorkerSignals:
    """Hooks the worker calls at each step; no-ops in production, events in tests."""

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Jobs were claimed."""

    def finished(self, job: Job, outcome: Outcome, accepted: bool) -> None:
        """The store recorded (accepted) or fenced off (not accepted) how an attempt ended."""

    def idle(self) -> None:
        """A claim round found nothing more to do for now."""


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    done: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    lost: int = 0
    released: int = 0
    rescued: int = 0
    abandoned: int = 0
    # Sync handlers still running after their timeout failed the attempt. Their threads cannot
    # be stopped: a process with any should exit (the CLI's exits with code 75).
    stuck: int = 0


@dataclass(eq=False)
class _Running:
    job: Job
    ctx: JobContext
    started: float = field(default_factory=time.monotonic)
    heartbeat_due: float = 0.0
    task: asyncio.Task[None] | None = None
    in_thread: bool = False
    # An async handler is running on the event loop (the suspects when the loop is blocked).
    on_loop: bool = False
    # A sync handler ran past its task's timeout and its thread is still running.
    stuck: bool = False
    # The handler is done and its result waits for the completer. Heartbeats go on (a slow
    # report must not let the lease lapse), but a refused one may just have crossed the report.
    reporting: bool = False


@dataclass(eq=False)
class _Runtime:
    """What exists only while the worker runs on an event loop."""

    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    heartbeat_wake: asyncio.Event = field(default_factory=asyncio.Event)
    stop_now: asyncio.Event = field(default_factory=asyncio.Event)
    results: asyncio.Queue[_Result] = field(default_factory=asyncio.Queue)


@dataclass(slots=True)
class _Result:
    job: Job
    params: JobFinishParams


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs the jobs of an App's queues until stopped (or, in burst mode, until none is due).

    `metrics` (else the app's `metrics`, if any) counts what this worker claims, runs and
    reports; without one the worker does no metrics work at all."""

    def __init__(
        self,
        app: App,
        options: WorkerOptions | None = None,
        signals: WorkerSignals | None = None,
        ledger: JobLedger | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.app = app
        self.options = (options or WorkerOptions()).validated()
        self.signals = signals or WorkerSignals()
        self.metrics = metrics if metrics is not None else app.metrics
        self._on_fenced = self.metrics.fenced if self.metrics is not None else None
        # Attempts (id, token) whose lost lease a refused heartbeat counted: their refused
        # result then does not count it again.
        self._lost_counted: set[tuple[int, int]] = set()
        self.worker_id = self.options.worker_id or default_worker_id()
        self.queues = list(self.options.queues or app.queues)
        if not self.queues:
            raise ConfigError("the worker has no queue to serve: register a task or pass queues")
        self.stats = WorkerStats()
        self._leases = {name: task.lease for name, task in app.tasks.items()}
        self._max_attempts = {name: task.max_attempts for name, task in app.tasks.items()}
        # Every job this worker holds a lease on: running, or finished and not yet reported.
        self._owned: dict[int, _Running] = {}
        # Handlers executing now. Slots free when a handler returns, not when its result is
        # stored, so the next claim overlaps the previous batch's report.
        self._running = 0
        # Claimed ahead, waiting for a slot (leased and heartbeated like running jobs).
        self._buffer: collections.deque[_Running] = collections.deque()
        # Moving averages that decide whether to claim ahead (see _free_slots).
        self._handler_seconds = _Average()
        self._claim_seconds = _Average()
        # Consecutive claims that left a due row behind (see _pause_until_due).
        self._missed_due = 0
        # The claim loop is waiting for a slot: a handler returning should wake it.
        self._waiting_for_slot = False
        self._stop_requested = False
        self._runtime: _Runtime | None = None
        self._helper_failure: BaseException | None = None
        self._closing = threading.Event()
        self._next_rescue = 0.0
        self._ledger = ledger or JobLedger()
        # Results of timed-out sync attempts, reported last (see STUCK_RETRY_FLOOR).
        self._stuck_results: list[_Result] = []
        self._loop_seen = time.monotonic()
        limit = self.options.batch_size or self.options.concurrency
        self._batch_size = min(limit, self.options.concurrency)
        self._io_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="chronoq-io")
        self._handler_pool = ThreadPoolExecutor(
            max_workers=self.options.concurrency, thread_name_prefix="chronoq-job"
        )

    # -- running --------------------------------------------------------------------------

    def run(self, *, install_signal_handlers: bool = True) -> WorkerStats:
        """Run on a new event loop; SIGTERM/SIGINT stop gracefully, a second one at once."""
        return asyncio.run(self.run_async(install_signal_handlers=install_signal_handlers))

    async def run_async(self, *, install_signal_handlers: bool = False) -> WorkerStats:
        self._runtime = _Runtime(asyncio.get_running_loop())
        if install_signal_handlers:
            self._install_signal_handlers()
        if self.app.limits or self.app.key_limits:
            await self._io(self.app.sync_limits)
        log.info(
            "worker %s serving %s (concurrency %d)",
            self.worker_id,
            ",".join(self.queues),
            self.options.concurrency,
            extra={"action": "worker.start", "worker": self.worker_id},
        )
        self._ledger.hello(self.worker_id)
        listener = threading.Thread(target=self._listen, name="chronoq-listen", daemon=True)
        listener.start()
        helpers = [
            asyncio.create_task(self._completer_loop(), name="chronoq-completer"),
            asyncio.create_task(self._heartbeat_loop(), name="chronoq-heartbeat"),
        ]
        if self.options.exit_when_blocked:
            helpers.append(asyncio.create_task(self._pulse(), name="chronoq-pulse"))
            watchdog = threading.Thread(target=self._watch_loop, name="chronoq-watch", daemon=True)
            watchdog.start()
        for helper in helpers:
            helper.add_done_callback(self._on_helper_done)
        try:
            await self._claim_loop()
        finally:
            await self._shutdown(helpers)
            self._closing.set()
            listener.join(timeout=2.0)
        if self._helper_failure is not None:
            raise self._helper_failure
        return self.stats

    def _on_helper_done(self, helper: asyncio.Task[None]) -> None:
        """The completer and the heartbeater run for the worker's whole life. If one of them
        dies, the worker must not go on claiming jobs it can neither report nor keep: it logs
        the cause, stops at once, and `run` raises the error."""
        if helper.cancelled() or helper.exception() is None:
            return
        self._helper_failure = helper.exception()
        log.critical(
            "%s failed; stopping the worker",
            helper.get_name(),
            exc_info=self._helper_failure,
            extra={"action": "worker.helper_failed", "worker": self.worker_id},
        )
        self.request_stop(immediate=True)

    @property
    def _rt(self) -> _Runtime:
        if self._runtime is None:
            raise RuntimeError("the worker is not running")
        return self._runtime

    def request_stop(self, *, immediate: bool = False) -> None:
        """Stop claiming and finish in-flight jobs (within the grace period). Thread-safe."""
        again = self._stop_requested
        # The flag is set here, not in the loop callback, so a claim already on its way back
        # sees it and releases what it got instead of starting it.
        self._stop_requested = True
        runtime = self._runtime
        if runtime is not None and not runtime.loop.is_closed():
            runtime.loop.call_soon_threadsafe(self._on_stop, immediate or again)

    def _on_stop(self, immediate: bool) -> None:
        if immediate:
            self._rt.stop_now.set()
        self._rt.wake.set()

    def _install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._rt.loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        log.info(
            "received %s: %s",
            signal.Signals(signum).name,
            "stopping now" if self._stop_requested else "finishing in-flight jobs",
            extra={"action": "worker.signal", "worker": self.worker_id},
        )
        self.request_stop()

    async def _io(self, fn: Any, *args: Any) -> Any:
        return await self._rt.loop.run_in_executor(self._io_pool, fn, *args)

    # -- claiming -------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        failures = 0
        while not self._stop_requested:
            self._rt.wake.clear()
            try:
                pause = await self._unless_stopped_now(self._claim_round())
                failures = 0
            except _StoppedNow:
                return
            except StoreError as exc:
                failures += 1
                pause = min(5.0, 0.05 * 2**failures)
                log.error(
                    "store error, retrying in %.1fs: %s",
                    pause,
                    exc,
                    extra={"action": "worker.store_error", "worker": self.worker_id},
                )
            if pause is None:
                return
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._rt.wake.wait(), pause)

    async def _unless_stopped_now(self, work: Coroutine[Any, Any, float | None]) -> float | None:
        """Await `work`, but give up on it when an immediate stop is requested: a store call
        stuck on an unreachable database must not hold the second Ctrl-C hostage."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._rt.stop_now.wait())
        done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task in done:
            return task.result()
        task.cancel()
        raise _StoppedNow

    def _free_slots(self) -> int:
        """How many jobs a claim may take now: free handler slots, plus a buffer of one batch
        while handlers are quicker than a claim round trip, but never more than `concurrency`
        results waiting to be reported (when the store is slow to take results, claiming stops
        instead of piling up leases).

        The buffer lets the next claim travel while the current batch runs. It is kept only
        for quick handlers: a buffered job waits about one handler's duration for its slot,
        which is then no longer than it would have waited for its own claim, and another idle
        worker would not have got it sooner. With slow handlers the buffer stays empty, so
        no job waits behind them while another worker is free."""
        concurrency = self.options.concurrency
        buffered = len(self._buffer)
        ahead = self._batch_size if self._handler_seconds.below(self._claim_seconds) else 0
        return min(
            concurrency - self._running - buffered + ahead, 2 * concurrency - len(self._owned)
        )

    async def _claim_round(self) -> float | None:
        """Claim what fits; return how long to wait before the next round (None: burst done)."""
        if time.monotonic() >= self._next_rescue:
            await self._rescue()
        free = self._free_slots()
        self._waiting_for_slot = free <= 0
        if free <= 0:
            return self.options.poll_interval  # a handler returning or a report wakes us
        wanted = min(free, self._batch_size)
        sent = time.monotonic()
        claim = await self._claim(wanted)
        if len(claim.jobs) == wanted:
            # More may be due: go again while slots are free, else when a handler returns.
            self._missed_due = 0
            self._waiting_for_slot = self._free_slots() <= 0
            return 0.0 if not self._waiting_for_slot else self.options.poll_interval
        pause = await self._pause_until_due(claim)
        # The wake-up was measured on the database clock while the claim ran; the time since
        # the claim was sent is already spent (this errs towards waking early, never late).
        return pause if pause is None else max(0.0, pause - (time.monotonic() - sent))

    async def _claim(self, limit: int) -> Claim:
        params = JobClaimParams(
            self.queues,
            limit,
            self.worker_id,
            leases=self._leases,
            max_attempts=self._max_attempts,
            default_max_attempts=self.app.config.default_max_attempts,
        )
        sent = time.monotonic()
        claim: Claim = await self._io(self.app.store.job_claim_with_wakeup, params)
        self._claim_seconds.add(time.monotonic() - sent)
        jobs = claim.jobs
        if not jobs:
            return claim
        self.stats.claimed += len(jobs)
        self.signals.claimed(jobs)
        if self.metrics is not None:
            self.metrics.claimed(jobs)
        if self._stop_requested:
            await self._release(jobs)
            return Claim([], claim.wakeup)
        for job in jobs:
            ctx = JobContext(job, self.worker_id, self.app.store, on_fenced=self._on_fenced)
            running = _Running(job, ctx)
            running.heartbeat_due = running.started + job.lease_seconds / 3
            self._owned[job.id] = running
            self._buffer.append(running)
        self._start_buffered()
        self._rt.heartbeat_wake.set()
        return claim

    async def _pause_until_due(self, claim: Claim) -> float | None:
        wakeup = claim.wakeup
        expiry = wakeup.next_lease_expiry
        if expiry is not None and expiry <= wakeup.db_now and await self._rescue():
            return 0.0
        if wakeup.next_run_at is not None and wakeup.next_run_at <= wakeup.db_now:
            # A row is due that our claim did not get. Most often it fell due between the
            # claim and this query (jobs arriving by the thousand per second): claim again at
            # once. If it is still there after that, another worker holds its lock; back off
            # a little, doubling, so two workers do not spin on each other's rows.
            self._missed_due = 0 if claim.jobs else self._missed_due + 1
            return 0.0 if self._missed_due <= 1 else min(0.05, 0.001 * 2**self._missed_due)
        self._missed_due = 0
        self.signals.idle()
        if self.options.burst and not self._owned:
            return None
        until = wakeup.seconds_until_next()
        return (
            self.options.poll_interval if until is None else min(until, self.options.poll_interval)
        )

    async def _rescue(self) -> int:
        self._next_rescue = time.monotonic() + self.options.rescue_interval
        result = await self._io(self.app.store.job_rescue_expired, JobRescueParams())
        count = len(result.requeued) + len(result.dead)
        if count:
            self.stats.rescued += count
            if self.metrics is not None:
                self.metrics.lease_expired("rescuer", count)
            log.warning(
                "rescued %d job(s) whose lease expired: requeued %s, dead %s",
                count,
                result.requeued,
                result.dead,
                extra={
                    "action": "worker.rescue",
                    "worker": self.worker_id,
                    "requeued": result.requeued,
                    "dead": result.dead,
                },
            )
        return count

    async def _release_buffered(self) -> None:
        """At shutdown: give back the jobs claimed ahead that never started."""
        waiting = [self._owned.pop(r.job.id) for r in self._buffer]
        self._buffer.clear()
        if waiting:
            await self._release([r.job for r in waiting])
            self._ledger.ended(r.job for r in waiting)

    async def _release(self, jobs: Sequence[Job]) -> None:
        refs = [JobLeaseRef(job.id, job.lease_token) for job in jobs]
        released: set[int] = await self._io(self.app.store.job_release_many, refs)
        self.stats.released += len(released)
        log.info(
            "released %d claimed job(s) that had not started",
            len(released),
            extra={
                "action": "worker.release",
                "worker": self.worker_id,
                "job_ids": sorted(released),
            },
        )

    # -- running jobs ---------------------------------------------------------------------

    def _start_buffered(self) -> None:
        concurrency = self.options.concurrency
        started: list[Job] = []
        while self._buffer and self._running < concurrency and not self._stop_requested:
            running = self._buffer.popleft()
            running.started = time.monotonic()
            self._running += 1
            running.task = asyncio.create_task(
                self._execute(running), name=f"chronoq-job-{running.job.id}"
            )
            started.append(running.job)
        # Written before the handlers run: the tasks start only when the loop next turns.
        self._ledger.started(started)

    async def _execute(self, running: _Running) -> None:
        job = running.job
        # This task's own context, inherited by a sync handler's thread: what the handler logs
        # carries the job's fields (see chronoq.observability.logs).
        current_job.set(job)
        running.started = time.monotonic()
        try:
            params = await self._run_handler(running)
        except asyncio.CancelledError:
            if running.in_thread:
                # The thread cannot be stopped; leave the lease to expire so the rescuer, not
                # this process, decides, and nobody runs the job while the thread still does.
                self.stats.abandoned += 1
                return
            params = self._failed(running, _Interrupted("worker shut down mid-job"), delay=0.0)
        finally:
            self._running -= 1
            elapsed = time.monotonic() - running.started
            self._handler_seconds.add(elapsed)
            if self.metrics is not None:
                self.metrics.ran(job.queue, elapsed)
            self._start_buffered()
            if self._waiting_for_slot:
                self._rt.wake.set()
        if running.stuck and params is not None:
            self._retire(running, params)
        elif params is None:
            self._disown(job)
            self._ledger.ended((job,))
            self.stats.done += 1
            self.signals.finished(job, Outcome.DONE, True)
            if self.metrics is not None:
                self.metrics.finished(job, Outcome.DONE)
            self._log_finished(job, Outcome.DONE, time.monotonic() - running.started)
        else:
            running.reporting = True
            await self._rt.results.put(_Result(job, params))

    async def _run_handler(self, running: _Running) -> JobFinishParams | None:
        job = running.job
        task = self.app.tasks.get(job.task)
        if task is None:
            known = ", ".join(sorted(self.app.tasks)) or "none"
            return self._dead(
                running,
                "UnknownTask",
                f"task {job.task!r} is not registered in this worker (it knows: {known})",
            )
        misfit = task.payload_shape.misfit(job.payload)
        if misfit:
            return self._dead(running, "InvalidPayload", misfit)
        try:
            await self._call_handler(running, task)
        except Retry as retry:
            delay = retry.delay if retry.delay is not None else task.backoff.delay(job.attempts)
            return self._failed(running, retry, delay=max(0.0, delay))
        except Discard as discard:
            return self._finish(running, Outcome.CANCELLED, _error(running, discard, "cancelled"))
        except (Exception, SystemExit) as exc:
            return self._failed(running, exc, delay=task.backoff.delay(job.attempts))
        if running.ctx.completed_in_transaction:
            return None
        return JobFinishParams(job.id, job.lease_token, Outcome.DONE)

    async def _call_handler(self, running: _Running, task: Task[Any, Any]) -> None:
        args = (running.ctx,) if task.takes_context else ()
        payload = running.job.payload
        if task.is_async:
            deadline = asyncio.timeout(task.timeout)
            running.on_loop = True
            try:
                async with deadline:
                    await task.fn(*args, **payload)
            except TimeoutError:
                if deadline.expired():
                    raise _timed_out(task) from None
                raise
            finally:
                running.on_loop = False
            return
        context = contextvars.copy_context()
        call = functools.partial(context.run, task.fn, *args, **payload)
        running.in_thread = True
        future = self._rt.loop.run_in_executor(self._handler_pool, call)
        done, _ = await asyncio.wait({future}, timeout=task.timeout)
        if not done:
            running.stuck = True
            # Whatever the thread ends with later is no one's business any more.
            future.add_done_callback(_discard_outcome)
            raise _timed_out(task)
        running.in_thread = False
        future.result()

    def _retire(self, running: _Running, params: JobFinishParams) -> None:
        """A sync handler is stuck past its timeout: stop claiming, let the other jobs finish,
        report this attempt's failure last, and leave the process for a fresh one to replace."""
        self.stats.stuck += 1
        if params.outcome == Outcome.RETRY:
            params = dataclasses.replace(
                params, retry_delay=max(params.retry_delay, STUCK_RETRY_FLOOR)
            )
        self._stuck_results.append(_Result(running.job, params))
        log.error(
            "job %d %s ran past its %.3gs timeout in a thread that cannot be stopped; "
            "finishing the other jobs, then exiting for a fresh process",
            running.job.id,
            running.job.task,
            self.app.tasks[running.job.task].timeout,
            extra=_job_extra(running.job, "worker.retire", self.worker_id),
        )
        self.request_stop()

    def _failed(self, running: _Running, exc: BaseException, *, delay: float) -> JobFinishParams:
        job = running.job
        if job.out_of_attempts:
            return self._finish(running, Outcome.DEAD, _error(running, exc, "dead"))
        return self._finish(running, Outcome.RETRY, _error(running, exc, "retry"), delay)

    def _dead(self, running: _Running, kind: str, message: str) -> JobFinishParams:
        error = _error(running, None, "dead") | {"error": kind, "message": message}
        return self._finish(running, Outcome.DEAD, error)

    def _finish(
        self, running: _Running, outcome: Outcome, error: dict[str, Any], delay: float = 0.0
    ) -> JobFinishParams:
        job = running.job
        return JobFinishParams(job.id, job.lease_token, outcome, delay, error)

    # -- reporting ------------------------------------------------------------------------

    async def _completer_loop(self) -> None:
        while True:
            batch = [await self._rt.results.get()]
            while not self._rt.results.empty() and len(batch) < 1000:
                batch.append(self._rt.results.get_nowait())
            try:
                await self._flush(batch)
            finally:
                for _ in batch:
                    self._rt.results.task_done()

    async def _flush(self, batch: list[_Result]) -> None:
        failures = 0
        while True:
            try:
                accepted: set[int] = await self._io(
                    self.app.store.job_finish_many, [r.params for r in batch]
                )
                break
            except StoreError as exc:
                failures += 1
                extra = self._batch_extra("worker.report_error", [r.job for r in batch])
                if self._rt.stop_now.is_set():
                    log.error(
                        "could not report %d result(s) before stopping: %s",
                        len(batch),
                        exc,
                        extra=extra,
                    )
                    accepted = set()
                    break
                pause = min(5.0, 0.05 * 2**failures)
                log.error(
                    "could not report results, retrying in %.1fs: %s", pause, exc, extra=extra
                )
                await asyncio.sleep(pause)
        for result in batch:
            self._record(result, result.params.id in accepted)
        if self.metrics is not None:
            ends = ((r.job, r.params.outcome) for r in batch if r.params.id in accepted)
            self.metrics.finished_many(ends)
        if self._waiting_for_slot or self.options.burst:
            # Reported results may free room under the cap; a burst may now be over.
            self._rt.wake.set()

    def _disown(self, job: Job) -> _Running | None:
        """Forget the attempt `job` stands for. A stale attempt that ends after this worker
        claimed its job again must not take the newer attempt's entry with it: that one would
        no longer be heartbeated, and would lose its lease too."""
        running = self._owned.get(job.id)
        if running is None or running.job.lease_token != job.lease_token:
            return None
        return self._owned.pop(job.id)

    def _record(self, result: _Result, accepted: bool) -> None:
        job, outcome = result.job, result.params.outcome
        running = self._disown(job)
        self._ledger.ended((job,))
        duration = time.monotonic() - running.started if running else 0.0
        if not accepted:
            self.stats.lost += 1
            if self.metrics is not None:
                self._count_lost(self.metrics, job, "finish")
            log.warning(
                "job %d: result %s discarded, lease token %d is stale (the job was rescued "
                "and claimed again)",
                job.id,
                outcome,
                job.lease_token,
                extra=_job_extra(job, "job.lost", self.worker_id),
            )
        else:
            counter = {"done": "done", "retry": "retried", "dead": "dead", "cancelled": "cancelled"}
            name = counter[str(outcome)]
            setattr(self.stats, name, getattr(self.stats, name) + 1)
            self._log_finished(job, outcome, duration, result.params)
        self.signals.finished(job, outcome, accepted)

    def _count_lost(self, metrics: Metrics, job: Job, kind: str) -> None:
        """A write of ours was refused: count it, and the lost lease once per attempt (a
        refused heartbeat comes first; the refused result of the same attempt follows)."""
        metrics.fenced(kind)
        attempt = (job.id, job.lease_token)
        if kind == "heartbeat":
            self._lost_counted.add(attempt)
            metrics.lease_expired("worker")
        elif attempt in self._lost_counted:
            self._lost_counted.discard(attempt)
        else:
            metrics.lease_expired("worker")

    def _batch_extra(self, action: str, jobs: Sequence[Job]) -> dict[str, Any]:
        return {"action": action, "worker": self.worker_id, "job_ids": [job.id for job in jobs]}

    def _log_finished(
        self, job: Job, outcome: Outcome, duration: float, params: JobFinishParams | None = None
    ) -> None:
        """One line per attempt: what happened, how long the attempt took, what comes next."""
        if not log.isEnabledFor(logging.WARNING if outcome != Outcome.DONE else logging.INFO):
            return
        head = f"job {job.id} {job.task} attempt {job.attempts}/{job.max_attempts}"
        error = params.error if params is not None else None
        cause = f": {error['error']}: {error['message']}" if error else ""
        if outcome == Outcome.DONE:
            message, level = f"{head} done in {duration:.3f}s", logging.INFO
        elif outcome == Outcome.RETRY:
            delay = params.retry_delay if params is not None else 0.0
            message = f"{head} failed after {duration:.3f}s, retrying in {delay:.3f}s{cause}"
            level = logging.WARNING
        elif outcome == Outcome.DEAD:
            message, level = f"{head} failed after {duration:.3f}s, now dead{cause}", logging.ERROR
        else:
            message, level = f"{head} cancelled after {duration:.3f}s{cause}", logging.WARNING
        log.log(level, message, extra=_job_extra(job, f"job.{outcome}", self.worker_id))

    # -- leases ---------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            due = [r.heartbeat_due for r in self._owned.values() if not r.ctx.lost]
            pause = max(0.0, min(due) - time.monotonic()) if due else 60.0
            self._rt.heartbeat_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rt.heartbeat_wake.wait(), pause)
            await self._heartbeat_due_jobs()

    async def _heartbeat_due_jobs(self) -> None:
        now = time.monotonic()
        # Jobs due within half their interval go along, so leases are renewed in batches.
        batch = [
            r
            for r in self._owned.values()
            if not r.ctx.lost and r.heartbeat_due - r.job.lease_seconds / 6 <= now
        ]
        if not batch:
            return
        refs = [r.ctx.ref for r in batch]
        try:
            accepted: set[int] = await self._io(self.app.store.job_heartbeat_many, refs)
        except StoreError as exc:
            extra = self._batch_extra("worker.heartbeat_error", [r.job for r in batch])
            log.error("heartbeat failed: %s", exc, extra=extra)
            return
        for running in batch:
            running.heartbeat_due = now + running.job.lease_seconds / 3
            refused = running.job.id not in accepted and running.job.id in self._owned
            if refused and not running.reporting:
                running.ctx.lost = True
                if self.metrics is not None:
                    self._count_lost(self.metrics, running.job, "heartbeat")
                log.warning(
                    "job %d: heartbeat rejected, the lease was lost; its result will be discarded",
                    running.job.id,
                    extra=_job_extra(running.job, "job.lease_lost", self.worker_id),
                )

    # -- wake-ups -------------------------------------------------------------------------

    def _listen(self) -> None:
        """Thread: turns database change notifications into wake-ups of the claim loop."""
        while not self._closing.is_set():
            try:
                listener = self.app.store.open_listener()
            except StoreError as exc:
                log.warning(
                    "cannot listen for new jobs, polling instead: %s",
                    exc,
                    extra={"action": "worker.listen_error", "worker": self.worker_id},
                )
                self._closing.wait(self.options.poll_interval)
                continue
            try:
                while not self._closing.is_set():
                    if listener.wait(0.5):
                        self._wake_from_thread()
            except StoreError as exc:
                log.warning(
                    "lost the change listener, reconnecting: %s",
                    exc,
                    extra={"action": "worker.listen_error", "worker": self.worker_id},
                )
            finally:
                listener.close()

    def _wake_from_thread(self) -> None:
        runtime = self._runtime
        if runtime is not None and not runtime.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                runtime.loop.call_soon_threadsafe(runtime.wake.set)

    # -- stopping -------------------------------------------------------------------------

    async def _shutdown(self, helpers: list[asyncio.Task[None]]) -> None:
        self._stop_requested = True
        # Bounded, like every store call at shutdown: after a second signal, or with the
        # database gone, the claimed-ahead jobs are left to their leases instead.
        with contextlib.suppress(StoreError, TimeoutError):
            await asyncio.wait_for(
                self._release_buffered(), 1.0 if self._rt.stop_now.is_set() else 10.0
            )
        await self._drain_in_flight()
        now = self._rt.stop_now.is_set()
        report_for = 1.0 if now else max(self.options.shutdown_grace, 5.0)
        await self._report_all(report_for)
        if self._stuck_results:
            for result in self._stuck_results:
                await self._rt.results.put(result)
            await self._report_all(report_for)
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        # After an immediate stop, a store call stuck on the network is not waited for.
        self._io_pool.shutdown(wait=not self._rt.stop_now.is_set(), cancel_futures=True)
        self._handler_pool.shutdown(wait=False, cancel_futures=True)
        log.info(
            "worker %s stopped: %s",
            self.worker_id,
            self.stats,
            extra={"action": "worker.stop", "worker": self.worker_id},
        )

    async def _report_all(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._rt.results.join(), timeout=timeout)
        except TimeoutError:
            log.error(
                "gave up reporting %d result(s); their leases will expire",
                self._rt.results.qsize(),
                extra={"action": "worker.report_abandoned", "worker": self.worker_id},
            )

    # -- a blocked event loop -------------------------------------------------------------

    async def _pulse(self) -> None:
        while True:
            self._loop_seen = time.monotonic()
            await asyncio.sleep(PULSE_SECONDS)

    def _watch_loop(self) -> None:
        """Thread: exits the process once the event loop has been blocked for longer than the
        lease of the async jobs running (one of them blocks it), or of every job the process
        holds when none is. By then the blocker's lease has run out and another worker may
        have it, and nothing else could end this process: no job of it is heartbeated or
        reported any more, and a stop request needs the loop too."""
        while not self._closing.wait(PULSE_SECONDS):
            blocked = time.monotonic() - self._loop_seen
            if blocked < 2 * PULSE_SECONDS:
                continue
            try:
                # Nothing changes these while the loop is blocked; a change means it is not.
                held = list(self._owned.values())
            except RuntimeError:
                continue
            suspects = [r for r in held if r.on_loop] or held
            if not suspects or blocked <= max(r.job.lease_seconds for r in suspects):
                continue
            log.critical(
                "the event loop has been blocked for %.0fs, past the leases of jobs %s; "
                "exiting with code %d for a fresh process to take over",
                blocked,
                ", ".join(f"{r.job.id} ({r.job.task})" for r in suspects),
                EXIT_RETIRED,
                extra=self._batch_extra("worker.blocked", [r.job for r in suspects]),
            )
            flush_logs()
            os._exit(EXIT_RETIRED)

    async def _drain_in_flight(self) -> None:
        in_flight = [r for r in self._owned.values() if r.task is not None and not r.task.done()]
        tasks = [r.task for r in in_flight if r.task is not None]
        if not tasks:
            return
        log.info(
            "waiting up to %.0fs for %d job(s) in flight",
            self.options.shutdown_grace,
            len(tasks),
            extra=self._batch_extra("worker.drain", [r.job for r in in_flight]),
        )
        stop_now: asyncio.Future[Any] = asyncio.ensure_future(self._rt.stop_now.wait())
        waiting: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.wait(
            [waiting, stop_now],
            timeout=self.options.shutdown_grace,
            return_when=asyncio.FIRST_COMPLETED,
        )
        stop_now.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Let cancelled async jobs hand their results to the completer.
        await asyncio.sleep(0)


class _Average:
    """An exponentially weighted mean of recent durations (unknown until the first one)."""

    __slots__ = ("value",)
    WEIGHT = 0.1

    def __init__(self) -> None:
        self.value: float | None = None

    def add(self, seconds: float) -> None:
        self.value = (
            seconds if self.value is None else self.value + self.WEIGHT * (seconds - self.value)
        )

    def below(self, other: _Average) -> bool:
        return self.value is not None and other.value is not None and self.value < other.value


class _StoppedNow(Exception):
    """An immediate stop cut the claim loop short."""


class _Interrupted(Exception):
    """The worker stopped while the job ran."""


def _timed_out(task: Task[Any, Any]) -> JobTimeout:
    return JobTimeout(f"the handler ran longer than its task's {task.timeout or 0:.6g}s timeout")


def _discard_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def flush_logs() -> None:
    """Before `os._exit`, which skips it: write out what the log handlers and streams hold."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _error(running: _Running, exc: BaseException | None, outcome: str) -> dict[str, Any]:
    job = running.job
    record: dict[str, Any] = {
        "attempt": job.attempts,
        "error": "",
        "message": "",
        "traceback": "",
        "worker": running.ctx.worker_id,
        "duration": round(time.monotonic() - running.started, 6),
        "outcome": outcome,
    }
    if exc is not None:
        kind = type(exc)
        record["error"] = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else (f"{kind.__module__}.{kind.__qualname__}")
        )
        record["message"] = str(exc)[:MESSAGE_LIMIT]
        record["traceback"] = "".join(traceback.format_exception(exc, limit=-12))[-TRACEBACK_LIMIT:]
    return record


def _job_extra(job: Job, action: str, worker_id: str) -> dict[str, Any]:
    return {
        "action": action,
        "job_id": job.id,
        "task": job.task,
        "queue": job.queue,
        "attempt": job.attempts,
        "worker": worker_id,
    }
