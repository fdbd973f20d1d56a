"""SAQ on Redis.

SAQ has no bulk enqueue: `Queue.enqueue` runs one Lua script per job, so the fastest path is
many enqueues in flight at once, which SAQ throttles with the queue's `max_concurrent_ops`.
Workers run `Worker.start`, which installs its own SIGINT/SIGTERM handlers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version as package_version

from saq import Worker
from saq.queue.redis import RedisQueue
from saq.types import Context

from bench.systems.base import AsyncPeer, Recorder, Target, WorkerConfig

FUNCTION = "noop"
# Enqueue calls started per gather. The queue itself lets `max_concurrent_ops` (default 20) of
# them talk to Redis at once; deeper in-flight counts measured no faster, so the default stays.
ENQUEUE_CHUNK = 1_000


class SaqSystem(AsyncPeer):
    name = "saq"
    title = f"SAQ {package_version('saq')}"
    backend = "redis"
    notes = (
        "Redis queue; `concurrency` is the worker's `concurrency` (one BLMOVE per job, no "
        "batch knob). No bulk enqueue exists, so the bulk figure is concurrent `enqueue` "
        "calls, run 20 at a time by the queue (`max_concurrent_ops` default). Scheduled jobs "
        "wait for the worker's 1 s `schedule` timer, its minimum (a lock TTL in whole seconds)."
    )

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._queue: RedisQueue | None = None

    # Its drain rate is steady well before this many jobs; the full count would take minutes.
    max_drain_jobs = 30_000
    best_layout = WorkerConfig(processes=2, concurrency=10, batch=1)
    herd_skip = (
        "no rate limit on job starts (`max_concurrent_ops` throttles the client's Redis "
        "calls, and `concurrency` is per worker)"
    )

    @classmethod
    def version(cls) -> str:
        return package_version("saq")

    # -- parent side ---------------------------------------------------------------------

    def _get_queue(self) -> RedisQueue:
        if self._queue is None:
            queue = RedisQueue.from_url(self.target.redis_url)
            self.run(queue.connect())
            self._queue = queue
        return self._queue

    def install(self) -> None:
        # SAQ has no schema; start from an empty Redis database.
        self.run(self._get_queue().redis.flushdb())

    def enqueue_noop(self, count: int) -> None:
        self._enqueue_bulk(count, scheduled=0)

    def enqueue_future(self, count: int) -> None:
        self._enqueue_bulk(count, scheduled=int(time.time()) + 86_400)

    def _enqueue_bulk(self, count: int, scheduled: int) -> None:
        queue = self._get_queue()

        async def enqueue() -> None:
            for start in range(0, count, ENQUEUE_CHUNK):
                size = min(ENQUEUE_CHUNK, count - start)
                await asyncio.gather(
                    *(queue.enqueue(FUNCTION, scheduled=scheduled) for _ in range(size))
                )

        self.run(enqueue())

    def enqueue_due(self, due: Sequence[float]) -> None:
        queue = self._get_queue()

        async def enqueue() -> None:
            now = time.time()
            # `scheduled` is epoch seconds and 0 means now: a job already due goes straight to
            # the queued list, whereas any other time waits for the worker's schedule timer.
            await asyncio.gather(
                *(queue.enqueue(FUNCTION, t=t, scheduled=t if t > now else 0) for t in due)
            )

        self.run(enqueue())

    async def enqueue_one_async(self) -> None:
        await self._get_queue().enqueue(FUNCTION)

    def unfinished(self, cap: int) -> int:
        # The incomplete set holds every job not yet finished: scheduled, queued and active.
        # A ZCARD costs the same whatever the cap.
        return int(self.run(self._get_queue().count("incomplete")))

    async def disconnect(self) -> None:
        if self._queue is not None:
            await self._queue.disconnect()
            self._queue = None

    # -- worker process ------------------------------------------------------------------

    @classmethod
    def serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        logging.getLogger("saq").setLevel(logging.WARNING)
        asyncio.run(cls._serve(target, config, recorder, ready))

    @classmethod
    async def _serve(
        cls, target: Target, config: WorkerConfig, recorder: Recorder, ready: Callable[[], None]
    ) -> None:
        async def noop(ctx: Context, *, t: float | None = None) -> None:
            recorder.started(t)

        queue = RedisQueue.from_url(target.redis_url)
        worker: Worker[Context] = Worker(
            queue, functions=[(FUNCTION, noop)], concurrency=config.concurrency
        )
        await queue.connect()
        ready()
        try:
            await worker.start()
        finally:
            await queue.disconnect()


SYSTEM = SaqSystem
