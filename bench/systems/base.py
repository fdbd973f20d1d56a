"""What every measured system provides: the harness drives them all through this one shape.

The harness (parent process) owns a fresh PostgreSQL database per run (`Target.pg_dsn`) and a
Redis database it flushes (`Target.redis_url`). A system installs its schema there, enqueues
jobs with its own fastest documented API, and says how many jobs are left. Workers run in
separate processes (`python -m bench.worker`), which import the system, build its worker, print
`ready`, wait for `go` on stdin, then run until SIGTERM. A job handler calls
`Recorder.started(t)` with the `t` of its payload: in the latency figures it prints the
lateness (now - t) so the parent can read it (in the steady stream's `stream` mode, a batch of
lines every few milliseconds); in the drain figures it does nothing.

The herd figure is for systems whose rate limit holds across worker processes: their workers
serve one rate-limited queue (`serve_herd`), and the figure reads when each job started from
the database afterwards, not from the workers.

The one-by-one enqueue figure calls `enqueue_singly` in the parent: the system's documented
single-job enqueue, one call at a time from one thread, as a web request makes it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """Where a run happens."""

    pg_dsn: str
    redis_url: str
    sqlite_path: str


@dataclass(frozen=True)
class WorkerConfig:
    """One worker layout: `processes` OS processes, each running `concurrency` jobs at once and
    fetching up to `batch` jobs per round trip (a system may ignore what it has no knob for)."""

    processes: int
    concurrency: int
    batch: int

    @property
    def label(self) -> str:
        return f"{self.processes}p c{self.concurrency} b{self.batch}"

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class RateLimit:
    """The herd queue's limit as the workers declare it: `rate` jobs a second, and the bucket
    size `burst` (None: the system's default, which the harness reads back from the store)."""

    rate: float
    burst: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


@dataclass(frozen=True)
class HerdStart:
    """One herd job as the database recorded it, in microseconds since the epoch: when it was
    due and when its claim started it; and which worker process claimed it."""

    due_us: int
    started_us: int
    worker: str = ""


class Recorder:
    """Handlers report when a job started; in `record` mode the lateness goes to stdout.

    With `flush_every` (seconds) the lines wait in memory and a thread writes them together
    that often: at thousands of jobs a second, a write per job (and the parent's read of each)
    takes enough of two shared cores to make the queue late by itself."""

    def __init__(self, record: bool, flush_every: float | None = None) -> None:
        self.record = record
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self._batched = record and flush_every is not None
        if self._batched:
            assert flush_every is not None
            threading.Thread(target=self._flush_loop, args=(flush_every,), daemon=True).start()

    def started(self, t: float | None) -> None:
        if not self.record or t is None:
            return
        line = f"{time.time() - t:.6f}\n"
        if self._batched:
            with self._lock:
                self._pending.append(line)
            return
        sys.stdout.write(line)
        sys.stdout.flush()

    def _flush_loop(self, every: float) -> None:
        while True:
            time.sleep(every)
            self.flush()

    def flush(self) -> None:
        """Write the lines waiting in memory, in one write."""
        with self._lock:
            lines, self._pending = self._pending, []
        if lines:
            sys.stdout.write("".join(lines))
            sys.stdout.flush()


class System:
    """Base class of the measured systems. Subclasses set the class attributes and override the
    methods; `serve` runs in the worker process, everything else in the parent."""

    name: ClassVar[str]
    title: ClassVar[str]
    backend: ClassVar[str]  # "postgres", "redis" or "sqlite"
    # Why this system is measured with these settings (docs consulted, knobs chosen).
    notes: ClassVar[str] = ""
    # False for a system that only drains (the bare SQL loop has no wake-up path).
    measures_latency: ClassVar[bool] = True
    # The layout a peer is measured in: the best one found exploring (bench/PEERS.md). The
    # default drain and latency layouts are just this one, to keep the suite in its time budget.
    best_layout: ClassVar[WorkerConfig | None] = None
    # A cap on the drain figure's job count for a system too slow to drain the full count in
    # the suite's time budget (its rate is still measured on the capped count).
    max_drain_jobs: ClassVar[int | None] = None
    # The herd figure's layout; None for a system without a rate limit that holds across its
    # worker processes, and `herd_skip` then says why (bench/PEERS.md has the detail).
    herd_layout: ClassVar[WorkerConfig | None] = None
    herd_skip: ClassVar[str] = ""

    def __init__(self, target: Target) -> None:
        self.target = target

    @classmethod
    def version(cls) -> str:
        raise NotImplementedError

    @classmethod
    def drain_configs(cls, smoke: bool) -> list[WorkerConfig]:
        """The layouts tried in the drain figure (the best one is the system's figure)."""
        return [cls._best()]

    @classmethod
    def latency_config(cls) -> WorkerConfig:
        """The layout used for pickup latency and due-to-start lateness: 10k jobs due within a
        second need throughput as much as a prompt wake-up."""
        return cls._best()

    @classmethod
    def _best(cls) -> WorkerConfig:
        if cls.best_layout is None:
            raise NotImplementedError(f"{cls.__name__} names no best_layout")
        return cls.best_layout

    def install(self) -> None:
        """Create the system's schema in the fresh database (or flush its Redis database)."""
        raise NotImplementedError

    def enqueue_noop(self, count: int) -> None:
        """Insert `count` immediately due no-op jobs by the fastest documented bulk path."""
        raise NotImplementedError

    def enqueue_due(self, due: Sequence[float]) -> None:
        """Insert one no-op job per epoch time in `due`, scheduled for that time, with the time
        in its payload as `t`. A single time is a pickup-latency probe and must use the
        system's ordinary single-job enqueue call."""
        raise NotImplementedError

    def enqueue_future(self, count: int) -> None:
        """Insert `count` jobs that are not due for a day (the backlog figure's ballast)."""
        raise NotImplementedError

    def unfinished(self, cap: int) -> int:
        """How many jobs are due or running, counting no further than `cap`. The harness polls
        this every few milliseconds to see a drain end, so it must be cheap: a count of a
        whole table would load the very server being measured."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections the parent-side methods opened."""

    # -- the one-by-one enqueue figure ----------------------------------------------------

    def enqueue_singly(self, count: int) -> list[float]:
        """Enqueue `count` immediately due no-op jobs, one call of the system's documented
        single-job enqueue at a time, from this thread; the seconds each call took."""
        return timed_calls(self.enqueue_one, count)

    def enqueue_one(self) -> None:
        """One immediately due no-op job by the system's documented single-job enqueue."""
        raise NotImplementedError

    # -- the herd figure (systems with a `herd_layout`) -----------------------------------

    def enqueue_herd(self, count: int, lead: float) -> int:
        """Insert `count` no-op jobs on the rate-limited queue, all due at one instant: the
        first whole second at least `lead` seconds after now by the database's clock. Returns
        that instant in microseconds since the epoch."""
        raise NotImplementedError

    def herd_unfinished(self, cap: int) -> int:
        """How many herd jobs are pending (due or not) or running, counting no further than
        `cap`; polled like `unfinished`, so it must be as cheap."""
        raise NotImplementedError

    def herd_starts(self) -> list[HerdStart]:
        """Every started herd job's due and start instants, read from the database."""
        raise NotImplementedError

    def herd_burst(self) -> float:
        """The herd queue's bucket size as the store holds it (the workers declared the
        limit, so this is what they enforced)."""
        raise NotImplementedError

    # -- worker process ------------------------------------------------------------------

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        """Build the worker, call `ready()` (which blocks until the parent says go), then run
        jobs until SIGTERM. The no-op handler takes an optional `t` and calls
        `recorder.started(t)` first thing."""
        raise NotImplementedError

    @classmethod
    def serve_herd(
        cls, target: Target, config: WorkerConfig, limit: RateLimit, ready: Callable[[], None]
    ) -> None:
        """Like `serve`, for workers that declare `limit` on the herd queue and serve only it.
        The handler records nothing: start times come from the database."""
        raise NotImplementedError


class AsyncPeer(System):
    """A peer whose client API is async: the parent-side calls run on a private event loop."""

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._loop = asyncio.new_event_loop()

    def run(self, awaitable: Awaitable[T]) -> T:
        return self._loop.run_until_complete(awaitable)

    def close(self) -> None:
        self.run(self.disconnect())
        self._loop.close()

    async def disconnect(self) -> None:
        """Close the connections the parent-side calls opened."""

    def enqueue_singly(self, count: int) -> list[float]:
        # Every call awaited inside one coroutine, as an async web handler awaits it: running
        # the loop once per call would add the loop's start and stop to each call.
        return self.run(timed_calls_async(self.enqueue_one_async, count))

    def enqueue_one(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} enqueues through enqueue_one_async")

    async def enqueue_one_async(self) -> None:
        """One immediately due no-op job by the system's documented single-job enqueue. The
        client was connected by `install`, so this may not open it (that needs `run`)."""
        raise NotImplementedError


def timed_calls(call: Callable[[], object], count: int) -> list[float]:
    """`call()` `count` times in a row; the seconds each took."""
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


async def timed_calls_async(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    """`await call()` `count` times in a row; the seconds each took."""
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        await call()
        seconds.append(time.perf_counter() - started)
    return seconds
