"""The worker: takes due jobs from its source, runs them, keeps their leases, reports how they
ended. It is a few small collaborators around one port:

```
             wake-ups: a slot frees · the source's signal (NOTIFY, data_version, a stream;
                 │   a worker waiting for it has the signal's thread send its claim: WakeClaim)
  claim loop ────┴── JobSource.take(free slots, paced by ClaimPacer) ─────────► store / queue
      │              (DbJobSource: rescue expired leases, then claim with SKIP LOCKED)
      │ one asyncio task per job
      ▼
  Executor ─────── async handlers on the loop, sync ones in a thread pool, timeouts
      ▼
  Completer ────── job_finish_many(everything finished so far), fenced ──────► store
  LeaseKeeper ──── job_heartbeat_many(attempts a third into their lease) ────► store
                   (its answer also names jobs cancelled while they run: their handlers stop)
  Watchdog ─────── exits the process when a handler blocks the loop past its lease
  Peers ────────── the worker's record in the fleet registry; hands jobs of tasks it does
                   not know to live workers that do (a rolling deploy)
      │
      └──────────── every step is an event to the observers: stats, log lines, metrics,
                    the supervisor's ledger, test signals (chronoq.observability.events)
```

The helpers (completer, lease keeper, watchdog) run for the worker's whole life and are
supervised by its `LoopState` (loopstate.py); `WorkerOptions` is in options.py.

Every store call runs in a small I/O thread pool so the loop never blocks on the database, and
every write is fenced by the job's lease token: a rejected write means the job was rescued and
claimed again elsewhere (this worker stalled or was cut off); it is counted, logged, and dropped.
A job cancelled while it runs is not lost: the heartbeat says so, the handler is stopped, and
its attempt ends cancelled (see `chronoq.worker.heartbeats`).
Store failures never end the loop: it logs them and backs off, because a database restart is an
ordinary event for a long-running worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from chronoq.core.jobs import Job, Outcome
from chronoq.errors import ConfigError, StoreError
from chronoq.observability.eventlog import EventLog
from chronoq.observability.events import (
    AttemptAbandoned,
    AttemptBegan,
    AttemptStuck,
    HandlerReturned,
    JobsClaimed,
    JobsReleased,
    JobsStarted,
    Observer,
    Observers,
    WorkerIdle,
    WorkerStarted,
    WorkerStopped,
    WriteFenced,
)
from chronoq.observability.logs import current_job
from chronoq.storage.base import JobFinishParams
from chronoq.worker.attempts import Attempt, Holdings, Shared
from chronoq.worker.completer import Completer
from chronoq.worker.context import JobContext
from chronoq.worker.executor import Executor, cancelled, drain_in_flight, interrupted
from chronoq.worker.heartbeats import LeaseKeeper
from chronoq.worker.ledger import JobLedger
from chronoq.worker.loops import loop_factory
from chronoq.worker.loopstate import LoopState, StoppedNow
from chronoq.worker.options import (
    YOUNG_COLLECTION_THRESHOLD,
    WorkerOptions,
    default_source,
    default_worker_id,
    tune_collector,
)
from chronoq.worker.pacing import ClaimPacer, Pause
from chronoq.worker.peers import Peers
from chronoq.worker.source import JobSource
from chronoq.worker.stats import WorkerStats
from chronoq.worker.wakeclaim import Claimed, MadeClaim, WakeClaim, claim
from chronoq.worker.watchdog import Watchdog

if TYPE_CHECKING:
    from chronoq.app import App

# WorkerOptions and the collector's tuning live in chronoq.worker.options; named here too, where
# the API and the tests have always imported them.
__all__ = ["YOUNG_COLLECTION_THRESHOLD", "Worker", "WorkerOptions", "tune_collector"]

log = logging.getLogger("chronoq.worker")


class Worker:
    """Runs the jobs of an App's queues until stopped (or, in burst mode, until none is due).

    `observers` get every event of this worker (see `chronoq.observability.events`; the test
    kit's `chronoq.testing.WorkerSignals` and `Metrics` are such observers), and so do the
    app's `observers`. `source` is where jobs come from: by default, claims from the app's
    store."""

    def __init__(
        self,
        app: App,
        options: WorkerOptions | None = None,
        observers: Iterable[Observer] = (),
        *,
        ledger: JobLedger | None = None,
        source: JobSource | None = None,
    ) -> None:
        self.runtime = runtime = app.runtime()
        self.options = (options or WorkerOptions()).validated()
        self.worker_id = self.options.worker_id or default_worker_id()
        self.queues = list(self.options.queues or runtime.queues)
        if not self.queues:
            raise ConfigError("the worker has no queue to serve: register a task or pass queues")
        self.stats = WorkerStats()
        # The app's observers (its `metrics`, say) hear this worker's events too.
        # The ledger first: the supervisor hears of an ended job before anything is logged.
        extra: list[Observer] = [ledger or JobLedger(), self.stats, EventLog(), *observers]
        self.events = Observers(extra, runtime.observers)
        self.holdings = Holdings()
        opts = self.options
        self.pacer = ClaimPacer(
            opts.concurrency, opts.claim_batch, opts.poll_interval, burst=opts.burst
        )
        self.source: JobSource = source or default_source(
            runtime, self.options, self.worker_id, self.queues, self.events
        )
        # Looked up at each claim: a caller may wrap the source once the worker is built.
        self._wake_claim = WakeClaim(lambda limit: self.source.take(limit))
        # The claim loop is waiting for a slot: a handler returning should wake it.
        self._waiting_for_slot = False
        self._stop_requested = False
        self._runtime: LoopState | None = None
        self._closing = threading.Event()
        self._io_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="chronoq-io")
        self._handler_pool = ThreadPoolExecutor(
            max_workers=opts.concurrency, thread_name_prefix="chronoq-job"
        )
        limit = opts.output_limit or runtime.config.output_limit
        self.executor = Executor(runtime.tasks, self._handler_pool, limit, runtime.middleware)
        self.peers = Peers(
            runtime, self.worker_id, self.queues, opts, self.holdings, self.events, self._io
        )
        self.fleet, self.beacon = self.peers.fleet, self.peers.beacon

    # -- running --------------------------------------------------------------------------

    def run(self, *, install_signal_handlers: bool = True) -> WorkerStats:
        """Run on a new event loop (`WorkerOptions.event_loop`); SIGTERM/SIGINT stop
        gracefully, a second one at once."""
        with asyncio.Runner(loop_factory=loop_factory(self.options.event_loop)) as runner:
            return runner.run(self.run_async(install_signal_handlers=install_signal_handlers))

    async def run_async(self, *, install_signal_handlers: bool = False) -> WorkerStats:
        rt = self._runtime = self._new_runtime()
        if install_signal_handlers:
            self._install_signal_handlers()
        if self.runtime.limits or self.runtime.key_limits:
            await self._io(self.runtime.sync_limits)
        self.events.emit(WorkerStarted(self.worker_id, self.queues, self.options.concurrency))
        self.beacon.start()
        self.source.start(self._wake_from_thread)
        watchdog = None
        if self.options.exit_when_blocked:
            watchdog = Watchdog(self.holdings, self.worker_id, self._closing)
        rt.start_helpers(watchdog, self.worker_id, partial(self.request_stop, immediate=True))
        if self.options.tune_gc:
            tune_collector()
        try:
            await self._claim_loop()
        finally:
            await self._shutdown()
            self._closing.set()
            self.source.close()
            await self.peers.leave()
        if rt.helper_failure is not None:
            raise rt.helper_failure
        return self.stats

    def _new_runtime(self) -> LoopState:
        stop_now = asyncio.Event()
        shared = Shared(self.runtime.store, self._io, self.holdings, self.events, self.worker_id)
        completer = Completer(shared, stop_now)
        completer.on_reported = self._after_report
        leases = LeaseKeeper(shared)
        return LoopState(asyncio.get_running_loop(), completer, leases, asyncio.Event(), stop_now)

    @property
    def _rt(self) -> LoopState:
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

    def _wake_from_thread(self) -> None:
        # On the source's thread: a waiting loop's claim is sent from here, before the loop
        # is woken to take its answer (see WakeClaim).
        self._wake_claim.make()
        runtime = self._runtime
        if runtime is not None and not runtime.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                runtime.loop.call_soon_threadsafe(runtime.wake.set)

    def _after_report(self) -> None:
        if self._waiting_for_slot or self.options.burst:
            # Reported results may free room under the cap; a burst may now be over.
            self._rt.wake.set()

    def _fenced(self, kind: str) -> None:
        self.events.emit(WriteFenced(kind))

    # -- claiming -------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        failures = 0
        # A claim the thread that woke the loop made during its last wait (see WakeClaim).
        made: MadeClaim | None = None
        while made is not None or not self._stop_requested:
            self._rt.wake.clear()
            if made is not None and made.woken_after:
                # Woken again after that claim left: the next pause is cut short, and the
                # next round claims what the claim could not have seen.
                self._rt.wake.set()
            try:
                round_ = self._claim_round() if made is None else self._settle(made.claimed)
                made = None
                pause = await self._rt.unless_stopped_now(round_)
                failures = 0
            except StoppedNow:
                return
            except StoreError as exc:
                failures += 1
                pause = Pause(min(5.0, 0.05 * 2**failures))
                log.error(
                    "store error, retrying in %.1fs: %s",
                    pause.seconds,
                    exc,
                    extra={"action": "worker.store_error", "worker": self.worker_id},
                )
            if pause.seconds is None:
                return
            if pause.seconds > 0:
                made = await self._wait(pause.seconds, claim=pause.idle)

    async def _wait(self, seconds: float, *, claim: bool) -> MadeClaim | None:
        """Wait for a wake-up, at most `seconds`. With `claim` (the last claim came back
        short), the thread that wakes the loop claims at once for the slots free now; returns
        that claim, if it made one."""
        free = self._free_slots() if claim and not self._stop_requested else 0
        if free > 0:
            self._wake_claim.open(self.pacer.wanted(free), len(self.holdings))
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rt.wake.wait(), seconds)
        finally:
            made = self._wake_claim.close()
        return made

    def _free_slots(self) -> int:
        holdings = self.holdings
        return self.pacer.free_slots(holdings.running, len(holdings.buffer), len(holdings))

    async def _claim_round(self) -> Pause:
        """Take what fits; return how long to wait before the next round."""
        free = self._free_slots()
        self._waiting_for_slot = free <= 0
        if free <= 0:
            return self.pacer.no_slot()
        wanted = self.pacer.wanted(free)
        # A result stored while the claim is out (a retry due at once, say) is not in what
        # the claim saw: the jobs held when it was sent count as held when it comes back.
        claimed: Claimed = await self._io(claim, self.source.take, wanted, len(self.holdings))
        return await self._claimed(claimed)

    async def _settle(self, made: Future[Claimed]) -> Pause:
        """Take the claim the waking thread made as this loop's own (its failure included)."""
        # Most often it is answered by now: its result is read without a turn of the loop.
        claimed = made.result() if made.done() else await asyncio.wrap_future(made)
        return await self._claimed(claimed)

    async def _claimed(self, claimed: Claimed) -> Pause:
        taken = claimed.taken
        self.pacer.claim_took(claimed.answered - claimed.sent)
        await self._hold(taken.jobs)
        if len(taken.jobs) == claimed.wanted:
            self._waiting_for_slot = self._free_slots() <= 0
            return self.pacer.after_full_claim(0 if self._waiting_for_slot else 1)
        held = max(claimed.held_when_sent, len(self.holdings))
        pause = self.pacer.after_partial_claim(taken, held, claimed.sent)
        if pause.idle:
            self.events.emit(WorkerIdle(self.worker_id))
        return pause

    async def _hold(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        self.events.emit(JobsClaimed(self.worker_id, jobs))
        if self._stop_requested:
            await self._give_back(jobs)
            return
        jobs = await self.peers.hand_off(jobs)
        attempts = []
        worker_id, store, on_fenced = self.worker_id, self.runtime.store, self._fenced
        output_limit = self.executor.output_limit
        # One clock reading for the batch: their leases started together, at the claim.
        claimed_at = time.monotonic()
        for job in jobs:
            ctx = JobContext(job, worker_id, store, on_fenced=on_fenced, output_limit=output_limit)
            attempt = Attempt(job, ctx, claimed_at)
            self.holdings.hold(attempt)
            attempts.append(attempt)
        self._start_buffered()
        self._rt.leases.held_more(attempts)

    async def _give_back(self, jobs: Sequence[Job]) -> None:
        released: set[int] = await self._io(self.source.give_back, jobs)
        self.events.emit(JobsReleased(self.worker_id, jobs, frozenset(released)))

    # -- running jobs ---------------------------------------------------------------------

    def _start_buffered(self) -> None:
        if self._stop_requested:
            return
        attempts = self.holdings.start_next(self.options.concurrency)
        if not attempts:
            return  # nothing claimed ahead waits, or every slot is taken
        # The loop's own create_task: asyncio.create_task adds two Python calls per job.
        create_task = self._rt.loop.create_task
        for attempt in attempts:
            # `_execute` stamps `started` when the task runs, one loop turn from now.
            attempt.task = create_task(self._execute(attempt), name=f"chronoq-job-{attempt.job.id}")
        # Emitted before the handlers run: the tasks start only when the loop next turns.
        self.events.emit(JobsStarted(self.worker_id, [attempt.job for attempt in attempts]))

    async def _execute(self, attempt: Attempt) -> None:
        job = attempt.job
        # This task's own context, inherited by a sync handler's thread: what the handler logs
        # carries the job's fields (see chronoq.observability.logs).
        current_job.set(job)
        if self.events.wants(AttemptBegan):
            self.events.emit(AttemptBegan(self.worker_id, job))
        attempt.started = time.monotonic()
        try:
            params = await self.executor.run(attempt)
            attempt.outcome = Outcome.DONE if params is None else params.outcome
        except asyncio.CancelledError:
            if attempt.in_thread and not attempt.ctx.cancelled:
                # The thread cannot be stopped; leave the lease to expire so the rescuer, not
                # this process, decides, and nobody runs the job while the thread still does.
                # (A cancelled job has no lease left and never runs again: its end is reported.)
                self.events.emit(AttemptAbandoned(self.worker_id, job))
                return
            params = cancelled(attempt, None) if attempt.ctx.cancelled else interrupted(attempt)
            attempt.outcome = params.outcome
        finally:
            self._handler_returned(attempt)
        if attempt.stuck and params is not None:
            self._retire(attempt, params)
        elif params is None:
            self._rt.completer.completed_in_transaction(job)
        else:
            attempt.reporting = True
            self._rt.completer.put(job, params)

    def _handler_returned(self, attempt: Attempt) -> None:
        self.holdings.running -= 1
        elapsed = time.monotonic() - attempt.started
        self.pacer.handler_took(elapsed)
        if self.events.wants(HandlerReturned):  # an event per job, built only when heard
            self.events.emit(
                HandlerReturned(attempt.job, elapsed, attempt.outcome, attempt.exception)
            )
        if self.holdings.buffer:  # most often empty: no call for nothing, once per job
            self._start_buffered()
        if self._waiting_for_slot:
            self._rt.wake.set()

    def _retire(self, attempt: Attempt, params: JobFinishParams) -> None:
        """A sync handler is stuck past its timeout: stop claiming, let the other jobs finish,
        report this attempt's failure last, and leave the process for a fresh one to replace."""
        self._rt.completer.hold_back(attempt.job, params)
        timeout = self.runtime.tasks[attempt.job.task].timeout or 0.0
        self.events.emit(AttemptStuck(self.worker_id, attempt.job, timeout))
        self.request_stop()

    # -- stopping -------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self._stop_requested = True
        # Bounded, like every store call at shutdown: after a second signal, or with the
        # database gone, the claimed-ahead jobs are left to their leases instead.
        with contextlib.suppress(StoreError, TimeoutError):
            await asyncio.wait_for(
                self._release_buffered(), 1.0 if self._rt.stop_now.is_set() else 10.0
            )
        await drain_in_flight(self.holdings, self.options.shutdown_grace, self._rt.stop_now)
        now = self._rt.stop_now.is_set()
        await self._rt.completer.report_all(1.0 if now else max(self.options.shutdown_grace, 5.0))
        await self._rt.stop_helpers()
        # After an immediate stop, a store call stuck on the network is not waited for.
        self._io_pool.shutdown(wait=not self._rt.stop_now.is_set(), cancel_futures=True)
        self._handler_pool.shutdown(wait=False, cancel_futures=True)
        self.events.emit(WorkerStopped(self.worker_id, str(self.stats)))

    async def _release_buffered(self) -> None:
        """At shutdown: give back the jobs claimed ahead that never started."""
        waiting = self.holdings.take_buffered()
        if waiting:
            await self._give_back([attempt.job for attempt in waiting])
