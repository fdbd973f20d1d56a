"""The app the browser tests serve and work: tasks on a few queues, one that fails on demand."""

from __future__ import annotations

import threading
from pathlib import Path

import chronoq

QUEUES = ("emails", "billing", "webhooks")
# Steps a test lets `copy_files` take, by the name its payload gives (the worker runs in the
# test's process).
GATES: dict[str, tuple[threading.Event, threading.Event]] = {}


class UpstreamError(RuntimeError):
    """What the failing tasks raise, so the dead letters name an error of their own."""


def build_app(dsn: str) -> chronoq.App:
    app = chronoq.App(dsn)

    @app.task(queue="emails")
    def send_email(to: str, subject: str = "") -> None:
        """Succeeds at once."""

    @app.task(queue="billing", max_attempts=1)
    def charge(flag: str, amount: int = 0) -> None:
        # Fails until the flag file exists: the test creates it before requeueing, so the
        # second run succeeds without the task keeping state between runs.
        if not Path(flag).exists():
            raise UpstreamError(f"card processor refused a charge of {amount}")

    @app.task(queue="webhooks", max_attempts=1)
    def call_webhook(url: str) -> None:
        if "down" in url:
            raise UpstreamError(f"POST {url}: 503 Service Unavailable")

    @app.task(queue="files", lease=0.9)
    def copy_files(ctx: chronoq.JobContext, gate: str, files: int) -> dict[str, int]:
        """Reports half its files copied, then all of them, one step per gate the test opens."""
        first, second = GATES[gate]
        ctx.progress(0.5, note=f"1 of {files} files")
        first.wait(60)
        ctx.progress(1.0, note=f"{files} of {files} files")
        second.wait(60)
        return {"copied": files}

    return app
