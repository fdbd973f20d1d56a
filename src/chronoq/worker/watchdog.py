"""Exits a worker process whose event loop an async handler has blocked for too long.

A coroutine on the loop records that the loop ran (`pulse`); a thread (`watch`) compares. Once
the loop has been blocked for longer than the leases of the async jobs running (one of them
blocks it), or of every job the process holds when none is, the blocker's lease has run out and
another worker may have it, and nothing else could end this process: no job of it is
heartbeated or reported any more, and a stop request needs the loop too. The process exits with
`EXIT_RETIRED` for its supervisor to replace it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time

from chronoq.observability.eventlog import batch_extra
from chronoq.worker.attempts import Holdings
from chronoq.worker.supervisor import EXIT_RETIRED

log = logging.getLogger("chronoq.worker")
PULSE_SECONDS = 0.5


class Watchdog:
    def __init__(self, holdings: Holdings, worker_id: str, closing: threading.Event) -> None:
        self.holdings = holdings
        self.worker_id = worker_id
        self.closing = closing
        self.loop_seen = time.monotonic()

    async def pulse(self) -> None:
        while True:
            self.loop_seen = time.monotonic()
            await asyncio.sleep(PULSE_SECONDS)

    def start(self) -> None:
        threading.Thread(target=self.watch, name="chronoq-watch", daemon=True).start()

    def watch(self) -> None:
        """Thread: checks the loop every pulse until the worker closes."""
        while not self.closing.wait(PULSE_SECONDS):
            blocked = time.monotonic() - self.loop_seen
            if blocked >= 2 * PULSE_SECONDS:
                self._check(blocked)

    def _check(self, blocked: float) -> None:
        try:
            # Nothing changes these while the loop is blocked; a change means it is not.
            held = list(self.holdings)
        except RuntimeError:
            return
        suspects = [a for a in held if a.on_loop] or held
        if not suspects or blocked <= max(a.job.lease_seconds for a in suspects):
            return
        log.critical(
            "the event loop has been blocked for %.0fs, past the leases of jobs %s; "
            "exiting with code %d for a fresh process to take over",
            blocked,
            ", ".join(f"{a.job.id} ({a.job.task})" for a in suspects),
            EXIT_RETIRED,
            extra=batch_extra("worker.blocked", self.worker_id, [a.job for a in suspects]),
        )
        flush_logs()
        os._exit(EXIT_RETIRED)


def flush_logs() -> None:
    """Before `os._exit`, which skips it: write out what the log handlers and streams hold."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
