"""The fleet registry at run time: each process's beacon, and what others read from it.

A `Beacon` is a daemon thread that records its process in the store at start and refreshes the
record every `interval` seconds, so that the record stays alive for `ttl` (6 intervals) after
the last beat that reached the database: a process that is killed, frozen or cut off drops out
of the live fleet within ttl, and one that stops cleanly marks itself stopped at once. A failed
beat is logged once and retried at the next interval: the registry informs operators and
producers, and a database hiccup must never stop a worker.

`FleetLookup` is the reading side for processes that ask the registry on a hot-ish path: the
worker asking whether a live process runs a task it does not know (a rolling deploy), the app
resolving tasks by name for producers without the handlers' code. It caches one read for
`max_age` seconds.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from chronoq.errors import ChronoqError
from chronoq.fleet.records import Fleet, ProcessInfo, RegisteredTask, TaskInfo, catalog
from chronoq.storage.base import JobStore, ProcessBeatParams, ProcessListParams

if TYPE_CHECKING:
    from chronoq.task import Task

log = logging.getLogger("chronoq.fleet")
BEAT_INTERVAL = 5.0
TTL_BEATS = 6  # a record outlives its last beat by this many intervals


def new_process_id() -> str:
    """host:pid:random, the form worker and scheduler ids take too."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def task_infos(tasks: Iterable[Task[Any, Any]]) -> tuple[TaskInfo, ...]:
    """The registry's records of an app's tasks."""
    return tuple(
        TaskInfo.describe(
            name=task.name,
            queue=task.queue,
            priority=task.priority,
            max_attempts=task.max_attempts,
            lease=task.lease,
            timeout=task.timeout,
            misfire=task.misfire,
            signature=task.payload_signature,
        )
        for task in tasks
    )


def this_process(
    process_id: str,
    kind: str,
    tasks: Iterable[Task[Any, Any]] = (),
    *,
    queues: Iterable[str] = (),
    concurrency: int | None = None,
) -> ProcessInfo:
    """What a process of this interpreter says of itself at start."""
    from chronoq import __version__

    return ProcessInfo(
        id=process_id,
        kind=kind,
        host=socket.gethostname(),
        pid=os.getpid(),
        version=__version__,
        queues=tuple(queues),
        concurrency=concurrency,
        tasks=task_infos(tasks),
    )


class Beacon:
    """Keeps one process's record fresh. `describe()` is called at every beat, from the
    beacon's thread, for what changes while the process runs (running jobs, duties)."""

    def __init__(
        self,
        store: JobStore,
        describe: Callable[[], ProcessInfo],
        *,
        interval: float = BEAT_INTERVAL,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"the beat interval must be positive, got {interval}")
        self.store = store
        self.describe = describe
        self.interval = interval
        self.ttl = interval * TTL_BEATS
        self.recorded = threading.Event()  # set after the first beat that reached the store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self._process_id = ""

    def start(self) -> None:
        self._process_id = self.describe().id
        self._thread = threading.Thread(target=self._run, name="chronoq-beacon", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and mark the record stopped (best effort: a process that cannot reach
        the database at exit drops out when its record expires)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5.0)
        try:
            self.store.process_stop(self._process_id)
        except ChronoqError as exc:
            log.debug("could not mark %s stopped: %s", self._process_id, exc)

    def beat(self) -> None:
        """Record the process now (the thread calls it every interval)."""
        self.store.process_beat(ProcessBeatParams(self.describe(), ttl=self.ttl))
        self.recorded.set()

    def _run(self) -> None:
        self._quietly(lambda: self.store.process_prune())
        while not self._stop.is_set():
            self._quietly(self.beat)
            self._stop.wait(self.interval)

    def _quietly(self, step: Callable[[], object]) -> None:
        try:
            step()
        except ChronoqError as exc:
            if not self._failing:
                log.warning(
                    "could not refresh this process's record in the fleet registry: %s",
                    exc,
                    extra={"action": "fleet.beat_failed", "process_id": self._process_id},
                )
            self._failing = True
            return
        if self._failing:
            log.info(
                "the fleet registry is reachable again",
                extra={"action": "fleet.beat_recovered", "process_id": self._process_id},
            )
        self._failing = False


class FleetLookup:
    """Reads the registry for decisions, at most once per `max_age` seconds."""

    def __init__(self, store: Callable[[], JobStore], *, max_age: float = 2.0) -> None:
        self._store = store
        self.max_age = max_age
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._fleet: Fleet | None = None
        self._catalog: dict[str, RegisteredTask] = {}

    def fleet(self) -> Fleet:
        """Live and recent records, read again when the last read is older than max_age."""
        with self._lock:
            if self._fleet is None or time.monotonic() - self._read_at > self.max_age:
                self._fleet = self._store().process_list(ProcessListParams(all=True))
                self._catalog = catalog(self._fleet.processes)
                self._read_at = time.monotonic()
            return self._fleet

    def tasks(self) -> Mapping[str, RegisteredTask]:
        """Every task a live or recent process knows (see `chronoq.fleet.records.catalog`)."""
        self.fleet()
        return self._catalog

    def runs_task(self, task: str, queue: str, *, besides: str | None = None) -> bool:
        """Does a live worker other than `besides` know `task` and serve `queue`?"""
        return self.fleet().runs_task(task, queue, besides=besides)

    def forget(self) -> None:
        """Read the registry again at the next question."""
        with self._lock:
            self._fleet = None
