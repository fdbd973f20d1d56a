"""What the long-running parts of chronoq use of an app: its `Runtime`.

```
 App (producer API, admin API, declarations, tasks) ── app.runtime() ──► Runtime (frozen)
                                                                            │ store, config
      Worker · Scheduler · LeaseRescuer · CronEnqueuer · Pruner ◄───────────┤ tasks, observers
      DbJobSource · StreamJobSource · TierLeader · the tier's wiring ◄──────┘ middleware, limits
```

A worker, a scheduler or a service is given this, not the whole `App`: what it may touch is
written here, and a test can build one without an app. `store` and `config` are read through
the app at each use, because an app opens its store lazily and a framework's app may point
its config at another database until then (Django's test runner does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chronoq.task import queues_of

if TYPE_CHECKING:
    from chronoq.config import Config
    from chronoq.core.ratelimit import KeyLimit
    from chronoq.observability.events import Observers
    from chronoq.scheduling import SyncReport
    from chronoq.storage import JobStore
    from chronoq.storage.base import QueueLimitParams
    from chronoq.task import Task
    from chronoq.worker.middleware import HandlerMiddleware


@dataclass(frozen=True, slots=True)
class Runtime:
    """An app as its worker, scheduler and services see it."""

    tasks: Mapping[str, Task[Any, Any]]  # the app's registry, read-only (tasks added later show)
    observers: Observers
    middleware: tuple[HandlerMiddleware, ...]
    limits: Mapping[str, QueueLimitParams]
    key_limits: Mapping[tuple[str, str], KeyLimit]
    open_store: Callable[[], JobStore]
    read_config: Callable[[], Config]
    sync: Callable[[], SyncReport]  # store the declared limits and schedules (a scheduler)
    sync_limits: Callable[[], None]  # store the declared limits (a worker)

    @property
    def store(self) -> JobStore:
        return self.open_store()

    @property
    def config(self) -> Config:
        return self.read_config()

    @property
    def queues(self) -> list[str]:
        """The queues the tasks use, in registration order."""
        return queues_of(self.tasks.values())
