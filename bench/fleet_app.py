"""The app figure 11's `chronoq worker` and `chronoq scheduler` processes load
(`--app bench.fleet_app:app`): one async task that sleeps as long as its payload says, so a
slot costs little CPU while it holds a job. The processes take their settings from CHRONOQ_*
variables; the figure's producer builds the same app with explicit ones."""

from __future__ import annotations

import asyncio
from typing import Any

import chronoq

TASK = "nap"


def build(**settings: Any) -> chronoq.App:
    app = chronoq.App(**settings)

    @app.task(name=TASK, max_attempts=3)
    async def nap(ms: int) -> None:
        await asyncio.sleep(ms / 1000)

    return app


app = build()
