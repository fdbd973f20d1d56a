"""Deprecated: which queues exist, and the checks of a queue to change, are part of the admin
API (`chronoq.admin`, reached as `app.admin`). These names call it, with a warning."""

from __future__ import annotations

import warnings

from chronoq.app import App
from chronoq.storage.base import QueueRemoval


def known_queues(app: App) -> set[str]:
    """Deprecated: `app.admin.known_queues()`."""
    _deprecated("known_queues(app)", "app.admin.known_queues()")
    return app.admin.known_queues()


def queue_to_change(app: App, name: str, *, create: bool = False) -> str:
    """Deprecated: the admin's queue operations check the name themselves."""
    _deprecated("queue_to_change(app, name)", "app.admin.pause_queue(name) and the like")
    return app.admin._queue_to_change(name, create=create)


def remove_queue(app: App, name: str) -> QueueRemoval:
    """Deprecated: `app.admin.remove_queue(name)`."""
    _deprecated("remove_queue(app, name)", "app.admin.remove_queue(name)")
    return app.admin.remove_queue(name)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"chronoq.queues.{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3
    )
