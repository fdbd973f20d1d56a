"""Runs one attempt's handler and turns how it ended into the store's finish parameters.

Async handlers run on the worker's event loop, under `asyncio.timeout` when their task has a
timeout. Sync handlers run in a thread pool; a thread cannot be stopped, so a sync handler past
its timeout is marked `stuck` and the worker retires (see `Worker`): its attempt fails with
`JobTimeout`, reported only once the process is about to exit.

An attempt whose job was cancelled while it ran (`ctx.cancelled`, set by the lease keeper) ends
cancelled however its handler ended: its async handler's task was cancelled, its sync handler
raised `JobCancelled` or returned, and a result it returned anyway is discarded.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import traceback
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from chronoq.config import DEFAULT_OUTPUT_LIMIT
from chronoq.core.jobs import Outcome
from chronoq.core.validate import encode_output
from chronoq.errors import Discard, InvalidOutput, JobCancelled, JobTimeout, Retry
from chronoq.observability.eventlog import batch_extra
from chronoq.storage.base import JobFinishParams
from chronoq.worker.attempts import Attempt, Holdings
from chronoq.worker.middleware import AppHooks, HandlerMiddleware, chain, chain_async

if TYPE_CHECKING:
    from chronoq.task import Task

log = logging.getLogger("chronoq.worker")
TRACEBACK_LIMIT = 4000
MESSAGE_LIMIT = 2000


class _Interrupted(Exception):
    """The worker stopped while the job ran."""


class Executor:
    """Calls handlers of `tasks`; sync ones on `pool`'s threads."""

    def __init__(
        self,
        tasks: Mapping[str, Task[Any, Any]],
        pool: ThreadPoolExecutor,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        middleware: Sequence[HandlerMiddleware] = (),
    ) -> None:
        self.tasks = tasks
        self.pool = pool
        self.output_limit = output_limit
        if any(isinstance(layer, AppHooks) for layer in middleware):
            warnings.warn(
                "overriding App.call_handler or call_handler_async is deprecated: list a "
                "chronoq.worker.middleware.HandlerMiddleware in App.middleware",
                DeprecationWarning,
                stacklevel=3,
            )
        self._call_sync = chain(middleware)
        self._call_async = chain_async(middleware)

    async def run(self, attempt: Attempt) -> JobFinishParams | None:
        """Run the handler; how the attempt ended (None: the handler completed the job in its
        own transaction, and there is nothing to report)."""
        job = attempt.job
        task = self.tasks.get(job.task)
        if task is None:
            known = ", ".join(sorted(self.tasks)) or "none"
            message = (
                f"task {job.task!r} is not registered in this worker (it knows: {known}), "
                f"and no live worker serving queue {job.queue!r} knows it"
            )
            return dead(attempt, "UnknownTask", message)
        misfit = task.payload_shape.misfit(job.payload)
        if misfit:
            return dead(attempt, "InvalidPayload", misfit)
        ctx = attempt.ctx
        if ctx.cancelled:
            return cancelled(attempt, None)  # cancelled while it waited for a slot
        try:
            if task.is_async:
                # Awaited here, not through a helper coroutine: one coroutine less per job
                # (a no-op handler's run takes 1.8 us instead of 2.25).
                attempt.on_loop = True
                try:
                    value = await self._async_handler(attempt, task)
                except asyncio.CancelledError:
                    if _cancel_was_the_jobs(attempt):
                        raise cancelled_error(attempt) from None
                    raise
                finally:
                    attempt.on_loop = False
            else:
                value = await self._call_in_thread(attempt, task)
        except (Exception, SystemExit) as exc:
            return _raised(attempt, task, exc)
        if ctx.cancelled:
            if task.is_async:
                _cancel_was_the_jobs(attempt)  # the handler swallowed the cancellation
            return cancelled(attempt, None)
        if ctx.completed_in_transaction:
            return None  # its output, if any, went with the completion (complete_in)
        if value is None:  # most handlers return nothing: no output to check
            return JobFinishParams(job.id, job.lease_token, Outcome.DONE)
        try:
            output = encode_output(job.task, value, self.output_limit)
        except InvalidOutput as exc:
            # Failed like any attempt: a retry may return something smaller, or go dead.
            return failed(attempt, exc, delay=task.backoff.delay(job.attempts))
        return JobFinishParams(job.id, job.lease_token, Outcome.DONE, output_json=output)

    def _async_handler(self, attempt: Attempt, task: Task[Any, Any]) -> Awaitable[Any]:
        """The async handler's awaitable, under `asyncio.timeout` when its task has one."""
        args = (attempt.ctx,) if task.takes_context else ()
        if task.timeout is None:
            # No deadline to keep: entering `asyncio.timeout(None)` would cost a context
            # manager and a task look-up per job for nothing.
            return self._async_call(task, args, attempt.job.payload)
        return self._call_async_within(attempt, task, args, task.timeout)

    def _async_call(
        self, task: Task[Any, Any], args: tuple[Any, ...], payload: Mapping[str, Any]
    ) -> Awaitable[Any]:
        """The handler's awaitable, through the middleware when there is any, so an app
        without middleware pays for no extra coroutine a job."""
        if self._call_async is not None:
            return self._call_async(task.fn, *args, **payload)
        result: Awaitable[Any] = task.fn(*args, **payload)
        return result

    async def _call_async_within(
        self, attempt: Attempt, task: Task[Any, Any], args: tuple[Any, ...], timeout: float
    ) -> Any:
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self._async_call(task, args, attempt.job.payload)
        except TimeoutError:
            if deadline.expired():
                raise timed_out(task) from None
            raise

    async def _call_in_thread(self, attempt: Attempt, task: Task[Any, Any]) -> Any:
        args = (attempt.ctx,) if task.takes_context else ()
        # The thread runs in this task's context: what the handler logs carries the job.
        context = contextvars.copy_context()
        call = functools.partial(
            context.run, self._call_sync, task.fn, *args, **attempt.job.payload
        )
        attempt.in_thread = True
        future = asyncio.get_running_loop().run_in_executor(self.pool, call)
        done, _ = await asyncio.wait({future}, timeout=task.timeout)
        if not done:
            attempt.stuck = True
            # Whatever the thread ends with later is no one's business any more.
            future.add_done_callback(_discard_outcome)
            raise timed_out(task)
        attempt.in_thread = False
        return future.result()


def _raised(attempt: Attempt, task: Task[Any, Any], exc: BaseException) -> JobFinishParams:
    """How an attempt whose handler raised `exc` ended."""
    attempt.exception = exc
    if attempt.ctx.cancelled or isinstance(exc, JobCancelled):
        return cancelled(attempt, exc)
    if isinstance(exc, Retry):
        delay = exc.delay if exc.delay is not None else task.backoff.delay(attempt.job.attempts)
        return failed(attempt, exc, delay=max(0.0, delay))
    if isinstance(exc, Discard):
        return _finish(attempt, Outcome.CANCELLED, error_record(attempt, exc, "cancelled"))
    return failed(attempt, exc, delay=task.backoff.delay(attempt.job.attempts))


def _cancel_was_the_jobs(attempt: Attempt) -> bool:
    """Was the task's cancellation the one the lease keeper asked for because the job was
    cancelled, and the only one? Then it is taken back, and the attempt ends cancelled; a
    shutdown's cancellation goes on."""
    if not attempt.ctx.cancelled:
        return False
    current = asyncio.current_task()
    if current is None or not current.cancelling():
        return False
    return current.uncancel() == 0


def cancelled_error(attempt: Attempt) -> JobCancelled:
    job = attempt.job
    return JobCancelled(f"job {job.id} was cancelled while attempt {job.attempts} ran")


def cancelled(attempt: Attempt, exc: BaseException | None) -> JobFinishParams:
    """An attempt whose job was cancelled while it ran: it ends cancelled, with no retry, and
    what the handler returned or raised after the cancel is discarded (a `JobCancelled` is
    kept in the job's history)."""
    if not isinstance(exc, JobCancelled):
        exc = cancelled_error(attempt)
    return _finish(attempt, Outcome.CANCELLED, error_record(attempt, exc, "cancelled"))


def failed(attempt: Attempt, exc: BaseException, *, delay: float) -> JobFinishParams:
    """A failed attempt: a retry after `delay`, or dead on its last attempt."""
    if attempt.job.out_of_attempts:
        return _finish(attempt, Outcome.DEAD, error_record(attempt, exc, "dead"))
    return _finish(attempt, Outcome.RETRY, error_record(attempt, exc, "retry"), delay)


def interrupted(attempt: Attempt) -> JobFinishParams:
    """An async attempt cut off by the worker's shutdown: it runs again at once."""
    return failed(attempt, _Interrupted("worker shut down mid-job"), delay=0.0)


def dead(attempt: Attempt, kind: str, message: str) -> JobFinishParams:
    """An attempt that cannot succeed however often it runs."""
    error = error_record(attempt, None, "dead") | {"error": kind, "message": message}
    return _finish(attempt, Outcome.DEAD, error)


def _finish(
    attempt: Attempt, outcome: Outcome, error: dict[str, Any], delay: float = 0.0
) -> JobFinishParams:
    job = attempt.job
    return JobFinishParams(job.id, job.lease_token, outcome, delay, error)


def error_record(attempt: Attempt, exc: BaseException | None, outcome: str) -> dict[str, Any]:
    """What the job's error list keeps of a failed attempt."""
    record: dict[str, Any] = {
        "attempt": attempt.job.attempts,
        "error": "",
        "message": "",
        "traceback": "",
        "worker": attempt.ctx.worker_id,
        "duration": round(time.monotonic() - attempt.started, 6),
        "outcome": outcome,
    }
    if exc is not None:
        kind = type(exc)
        builtin = kind.__module__ == "builtins"
        record["error"] = kind.__qualname__ if builtin else f"{kind.__module__}.{kind.__qualname__}"
        record["message"] = str(exc)[:MESSAGE_LIMIT]
        record["traceback"] = "".join(traceback.format_exception(exc, limit=-12))[-TRACEBACK_LIMIT:]
    return record


def timed_out(task: Task[Any, Any]) -> JobTimeout:
    return JobTimeout(f"the handler ran longer than its task's {task.timeout or 0:.6g}s timeout")


def _discard_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def drain_in_flight(holdings: Holdings, grace: float, stop_now: asyncio.Event) -> None:
    """At shutdown: give the handlers running `grace` seconds (less after `stop_now`), then
    cancel what is left. A cancelled async handler reports its attempt as interrupted; a sync
    one's thread cannot be stopped, and its attempt is abandoned to its lease."""
    in_flight = [a for a in holdings if a.task is not None and not a.task.done()]
    tasks = [a.task for a in in_flight if a.task is not None]
    if not tasks:
        return
    worker_id = in_flight[0].ctx.worker_id
    log.info(
        "waiting up to %.0fs for %d job(s) in flight",
        grace,
        len(tasks),
        extra=batch_extra("worker.drain", worker_id, [a.job for a in in_flight]),
    )
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop_now.wait())
    waiting: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.wait([waiting, stopped], timeout=grace, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Let cancelled async jobs hand their results to the completer.
    await asyncio.sleep(0)
