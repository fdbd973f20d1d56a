"""Which queues exist, and the checks of a queue to change: now part of the admin API
(`chronoq.admin`, reached as `app.admin`), which these functions call."""

from __future__ import annotations

from chronoq.app import App
from chronoq.storage.base import QueueRemoval


def known_queues(app: App) -> set[str]:
    """Every queue the app declares or the store has jobs or settings for."""
    return app.admin.known_queues()


def queue_to_change(app: App, name: str, *, create: bool = False) -> str:
    """`name`, checked: a queue name that is known, or any valid one with `create`."""
    return app.admin._queue_to_change(name, create=create)


def remove_queue(app: App, name: str) -> QueueRemoval:
    """Delete a known queue's stored settings; refused while it has pending or running jobs."""
    return app.admin.remove_queue(name)
