"""How a worker runs (`WorkerOptions`), and what it runs with unless told otherwise: its id,
its job source (`default_source`), and the collector's tuning (`tune_collector`)."""

from __future__ import annotations

import gc
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chronoq.errors import ConfigError
from chronoq.fleet.beacon import BEAT_INTERVAL
from chronoq.observability.events import Observers
from chronoq.worker.dbdispatch import DbJobSource
from chronoq.worker.loops import check_event_loop
from chronoq.worker.source import JobSource

if TYPE_CHECKING:
    from chronoq.runtime import Runtime


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
    # How often the worker refreshes its record in the fleet registry (chronoq.fleet).
    beat_interval: float = BEAT_INTERVAL
    # A job of a task this worker does not know, which a live worker serving its queue does
    # know, is given back to be due again this many seconds later (see `Peers.hand_off`).
    hand_off_delay: float = 2.0
    # The largest handler return value (JSON, bytes) stored as output; None: the app's
    # `output_limit` setting.
    output_limit: int | None = None
    # The loop `run` starts: "auto" (uvloop when installed), "uvloop" or "asyncio" (see
    # chronoq.worker.loops). `run_async` runs on whatever loop its caller runs.
    event_loop: str = "auto"
    # Once started, tune the collector for a process that makes and drops objects for every
    # job (`tune_collector`). It changes the collector for the whole process: the command sets
    # it; a program that runs a Worker itself decides for itself.
    tune_gc: bool = False

    def validated(self) -> WorkerOptions:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {self.batch_size}")
        for name in ("poll_interval", "rescue_interval", "beat_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive seconds, got {getattr(self, name)}")
        if self.hand_off_delay < 0:
            raise ConfigError(f"hand_off_delay must not be negative, got {self.hand_off_delay}")
        if self.output_limit is not None and (
            isinstance(self.output_limit, bool)
            or not isinstance(self.output_limit, int)
            or self.output_limit < 1
        ):
            raise ConfigError(
                f"output_limit must be a positive number of bytes, got {self.output_limit!r}"
            )
        if self.shutdown_grace < 0:
            raise ConfigError(f"shutdown_grace must not be negative, got {self.shutdown_grace}")
        check_event_loop(self.event_loop)
        return self

    @property
    def claim_batch(self) -> int:
        return min(self.batch_size or self.concurrency, self.concurrency)


# The youngest generation is collected after this many more allocations than deallocations
# of tracked objects, instead of CPython's 700.
YOUNG_COLLECTION_THRESHOLD = 20_000


def tune_collector() -> None:
    """`WorkerOptions.tune_gc`, for a worker that has started:

    - Garbage made while starting is collected, and every object then alive (modules, the
      app, the worker itself) is moved out of the collector's reach (`gc.freeze`). A busy
      worker promotes the objects of its jobs in flight to the oldest generation, so the
      collector walked the whole heap every few seconds, stopping every job of the process:
      12-21 ms every 2 s at 9,000 jobs/s a process, the late tail of a steady stream.
    - The youngest generation is collected every 20,000 net allocations instead of 700. Each
      job in flight holds objects of its own (its task, coroutines, attempt, context), so at
      the default one worker process draining 50,000 jobs 100 at a time ran 463 young
      collections and 41 of the middle generation, which freed nothing: every such object
      dies by its reference count once its job is reported. Cyclic garbage waits at most
      that many allocations longer.
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def default_source(
    runtime: Runtime, opts: WorkerOptions, worker_id: str, queues: list[str], events: Observers
) -> JobSource:
    """Claims from the store, or (tiered dispatch) entries of the app's Redis Streams."""
    if runtime.config.dispatch != "tiered":
        return DbJobSource(
            runtime,
            worker_id,
            queues,
            events,
            rescue_interval=opts.rescue_interval,
            poll_interval=opts.poll_interval,
        )
    if opts.burst:
        raise ConfigError(
            "burst mode drains the jobs table, which tiered workers do not read: run it "
            "with dispatch 'db' (CHRONOQ_DISPATCH=db)"
        )
    from chronoq.tier.source import StreamJobSource
    from chronoq.tier.wiring import open_reader

    reader = open_reader(runtime, queues, worker_id)
    return StreamJobSource(runtime, worker_id, reader, prefetch=2 * opts.concurrency)
