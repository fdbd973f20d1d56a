"""Which queues exist, so an administrator's typo does not create one.

A queue springs into being wherever a name is used, so a command that stores settings for a
name nobody uses would leave a queue behind that shows on the dashboard and in /metrics for
good. A queue is *known* when any of these names it:

```
  the app ─── its tasks' queues, its declared limits and key limits
  the store ─ queues with jobs (of any status), queues with stored settings
```

Pausing or limiting a queue that is not known is refused with the closest known name, unless
the caller asks for it on purpose (`create`). `chronoq queue remove` takes a queue's settings
away again once it has no pending or running jobs.
"""

from __future__ import annotations

from chronoq.app import App
from chronoq.core.enqueue import did_you_mean
from chronoq.core.validate import check_name
from chronoq.errors import QueueNotEmpty, QueueNotFound
from chronoq.storage.base import QueueRemoval


def known_queues(app: App) -> set[str]:
    """Every queue the app declares or the store has jobs or settings for."""
    declared = {*app.queues, *app.limits, *(queue for queue, _ in app.key_limits)}
    return declared | set(app.store.queue_names())


def queue_to_change(app: App, name: str, *, create: bool = False) -> str:
    """`name`, checked: a queue name that is known, or any valid one with `create`."""
    check_name("queue", name)
    if create:
        return name
    known = known_queues(app)
    if name not in known:
        raise QueueNotFound(f"unknown queue {name!r}{did_you_mean(name, known)}")
    return name


def remove_queue(app: App, name: str) -> QueueRemoval:
    """Delete a known queue's stored settings; refused while it has pending or running jobs."""
    removal = app.store.queue_remove(queue_to_change(app, name))
    if removal.busy:
        raise QueueNotEmpty(
            f"queue {name!r} has {removal.pending} pending and {removal.running} running "
            "job(s): wait for them to finish, or cancel them, then remove it"
        )
    return removal
