"""The app the browser tests serve and work: tasks on a few queues, one that fails on demand."""

from __future__ import annotations

from pathlib import Path

import chronoq

QUEUES = ("emails", "billing", "webhooks")


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

    return app
