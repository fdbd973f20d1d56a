"""What exists only while a worker runs on an event loop (`LoopState`): the loop, the events that
wake the claim loop and stop it at once, and the helpers that run beside it for the worker's
whole life: the completer, the lease keeper and, with `exit_when_blocked`, the watchdog's pulse.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chronoq.worker.completer import Completer
from chronoq.worker.heartbeats import LeaseKeeper
from chronoq.worker.watchdog import Watchdog

log = logging.getLogger("chronoq.worker")

T = TypeVar("T")


@dataclass(eq=False)
class LoopState:
    """What exists only while the worker runs on an event loop."""

    loop: asyncio.AbstractEventLoop
    completer: Completer
    leases: LeaseKeeper
    wake: asyncio.Event
    stop_now: asyncio.Event
    helpers: list[asyncio.Task[None]] = field(default_factory=list)
    # The error of a helper that died (the last, if several did), raised once the worker stops.
    helper_failure: BaseException | None = None

    def start_helpers(
        self, watchdog: Watchdog | None, worker_id: str, stop: Callable[[], None]
    ) -> None:
        """Start the helpers; `stop` stops the worker at once if one of them dies."""
        helpers = [
            asyncio.create_task(self.completer.run(), name="chronoq-completer"),
            asyncio.create_task(self.leases.run(), name="chronoq-heartbeat"),
        ]
        if watchdog is not None:
            helpers.append(asyncio.create_task(watchdog.pulse(), name="chronoq-pulse"))
            watchdog.start()
        for helper in helpers:
            helper.add_done_callback(lambda done: self._on_helper_done(done, worker_id, stop))
        self.helpers = helpers

    def _on_helper_done(
        self, helper: asyncio.Task[None], worker_id: str, stop: Callable[[], None]
    ) -> None:
        """The completer and the lease keeper run for the worker's whole life. If one of them
        dies, the worker must not go on claiming jobs it can neither report nor keep: it logs
        the cause, stops at once, and `run` raises the error."""
        if helper.cancelled() or helper.exception() is None:
            return
        self.helper_failure = helper.exception()
        log.critical(
            "%s failed; stopping the worker",
            helper.get_name(),
            exc_info=self.helper_failure,
            extra={"action": "worker.helper_failed", "worker": worker_id},
        )
        stop()

    async def stop_helpers(self) -> None:
        for helper in self.helpers:
            helper.cancel()
        await asyncio.gather(*self.helpers, return_exceptions=True)

    async def unless_stopped_now(self, work: Coroutine[Any, Any, T]) -> T:
        """Await `work`, but give up on it when an immediate stop is requested: a store call
        stuck on an unreachable database must not hold the second Ctrl-C hostage."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stop_now.wait())
        done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task in done:
            return task.result()
        task.cancel()
        raise StoppedNow


class StoppedNow(Exception):
    """An immediate stop cut the claim loop short."""
