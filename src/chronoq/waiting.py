"""Waiting for a job to end: `App.wait` and `App.wait_async`.

A waiter never polls its job. Each app keeps one `FinishWatcher`: a thread that holds the
store's finish listener (LISTEN chronoq_jobs_finished on PostgreSQL, the change signal of the
database file on SQLite) while anyone waits, and wakes every waiter when it fires. A woken
waiter reads its own job (one primary-key read) and goes back to waiting if it has not ended.

```
 waiter ── subscribe(wake) ──► FinishWatcher thread ── listener.wait() ◄── NOTIFY / commit
   │                                   │ fired: wake() every waiter
   └── job_get(id): ended? ◄───────────┘
```

A waiter subscribes, then marks its job as waited for (`job_watch`: on PostgreSQL only the ends
of marked jobs are notified), before its first read, so a job that ends between the read and the
wait still wakes it. If the listener's connection fails, the watcher wakes everyone and stops; each
waiter then subscribes again, which opens a new listener (or raises `StoreUnavailable` if the
database cannot be reached), before it reads its job again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable

from chronoq.core.jobs import Job, JobStatus
from chronoq.errors import (
    JobFailed,
    JobNotDone,
    JobNotFound,
    JobSkipped,
    JobWasCancelled,
    StoreError,
    WaitTimeout,
)
from chronoq.storage.base import ChangeListener, JobStore

log = logging.getLogger("chronoq.wait")
# How long the watcher's thread blocks on its listener at a time. It only bounds how long an
# idle watcher (nobody waits any more, or the app closed) keeps its thread and its listening
# connection: a waiter is woken by the notification itself, never by this timeout.
LISTEN_SLICE = 1.0

Wake = Callable[[], None]


class FinishWatcher:
    """One listener shared by every wait of an app (see the module docstring)."""

    def __init__(self, store: Callable[[], JobStore]) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._wakers: set[Wake] = set()
        self._running = False
        self._closed = False

    def subscribe(self, wake: Wake) -> None:
        """Call `wake` (from the watcher's thread) each time jobs may have ended; listening
        has started when this returns."""
        with self._lock:
            self._wakers.add(wake)
            self._closed = False
            if self._running:
                return
            try:
                listener = self._store().open_finish_listener()
            except BaseException:
                self._wakers.discard(wake)
                raise
            self._running = True
        threading.Thread(
            target=self._run, args=(listener,), name="chronoq-wait", daemon=True
        ).start()

    def listening_for(self, wake: Wake) -> bool:
        """Is `wake` subscribed to a listener that still runs? (Not after the listener's
        connection failed: then subscribe again.)"""
        with self._lock:
            return self._running and wake in self._wakers

    def unsubscribe(self, wake: Wake) -> None:
        with self._lock:
            self._wakers.discard(wake)

    def close(self) -> None:
        """Stop listening (the thread ends within LISTEN_SLICE); waiters are woken."""
        with self._lock:
            self._closed = True
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def _run(self, listener: ChangeListener) -> None:
        try:
            while self._still_wanted():
                try:
                    fired = listener.wait(LISTEN_SLICE)
                except StoreError as exc:
                    log.warning(
                        "lost the connection that waits for finished jobs: %s",
                        exc,
                        extra={"action": "wait.listener_lost"},
                    )
                    self._stop()
                    self._wake_all()
                    return
                if fired:
                    self._wake_all()
        finally:
            with contextlib.suppress(Exception):
                listener.close()

    def _still_wanted(self) -> bool:
        with self._lock:
            if self._wakers and not self._closed:
                return True
            self._running = False
            left = list(self._wakers)
        for wake in left:
            wake()  # closed under a waiter: it subscribes again, to a listener of its own
        return False

    def _stop(self) -> None:
        with self._lock:
            self._running = False

    def _wake_all(self) -> None:
        with self._lock:
            wakers = list(self._wakers)
        for wake in wakers:
            wake()


def wait_for(store: JobStore, watcher: FinishWatcher, job_id: int, timeout: float | None) -> object:
    """The output of job `job_id` once it is done (see `App.wait`)."""
    check_job_id(job_id)
    check_timeout(timeout)
    woken = threading.Event()
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        watcher.subscribe(woken.set)
        store.job_watch(job_id)  # listening: its end will wake us
        while True:
            woken.clear()
            if not watcher.listening_for(woken.set):
                watcher.subscribe(woken.set)  # the listener was lost
            job = _read(store, job_id)
            if job.status.is_final:
                return outcome(job)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(job_id, str(job.status), float(timeout or 0))
            woken.wait(remaining)
    finally:
        watcher.unsubscribe(woken.set)


async def wait_for_async(
    store: JobStore, watcher: FinishWatcher, job_id: int, timeout: float | None
) -> object:
    """`wait_for` on an event loop: the loop is never blocked, and cancelling the call stops
    the wait at once."""
    check_job_id(job_id)
    check_timeout(timeout)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(woken.set)

    try:
        async with asyncio.timeout(timeout):
            await asyncio.to_thread(watcher.subscribe, wake)
            await asyncio.to_thread(store.job_watch, job_id)
            while True:
                woken.clear()
                if not watcher.listening_for(wake):
                    await asyncio.to_thread(watcher.subscribe, wake)  # the listener was lost
                job = await asyncio.to_thread(_read, store, job_id)
                if job.status.is_final:
                    return outcome(job)
                await woken.wait()
    except TimeoutError:
        job = await asyncio.to_thread(_read, store, job_id)
        if job.status.is_final:
            return outcome(job)
        raise WaitTimeout(job_id, str(job.status), float(timeout or 0)) from None
    finally:
        watcher.unsubscribe(wake)


def check_job_id(job_id: int) -> None:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValueError(f"a job id is a whole number, got {job_id!r}")


def check_timeout(timeout: float | None) -> None:
    if timeout is None:
        return
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 <= timeout < math.inf
    ):
        raise ValueError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")


def _read(store: JobStore, job_id: int) -> Job:
    job = store.job_get(job_id)
    if job is None:
        raise JobNotFound(f"no job has id {job_id} (never enqueued, or pruned since it ended)")
    return job


_NOT_DONE: dict[JobStatus, type[JobNotDone]] = {
    JobStatus.DEAD: JobFailed,
    JobStatus.CANCELLED: JobWasCancelled,
    JobStatus.SKIPPED: JobSkipped,
}


def outcome(job: Job) -> object:
    """An ended job's output, or the error saying how it ended without one."""
    if job.status is JobStatus.DONE:
        return job.output
    raise _NOT_DONE[job.status](job)
