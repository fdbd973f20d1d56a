"""`chronoq scheduler` processes: two at once fire each tick once, and when the leader is
SIGKILLed the other takes over and the next ticks still fire, once each."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise

import pytest

from chronoq import App
from chronoq.storage.base import JobListParams
from tests.helpers import wait_until
from tests.integration.cli_support import Spawner

SCHEDULED_APP = """
import chronoq

app = chronoq.App()


@app.schedule("every 1s", misfire="run_late", misfire_grace="30s")
@app.task
def tick() -> None:
    pass
"""


@pytest.fixture
def scheduled_app(write_app: Callable[[str], str]) -> str:
    return write_app(SCHEDULED_APP)


def ticks(reader: App) -> list[object]:
    jobs = reader.store.job_list(JobListParams(limit=10_000))
    return sorted(job.tick for job in jobs if job.schedule == "tick")


def leader_pid(reader: App) -> int | None:
    term = reader.store.leader_get("scheduler")
    if term is None or term.expires_at <= reader.store.db_now():
        return None
    return int(term.holder.split(":")[1])


def test_two_scheduler_processes_fire_once_and_survive_a_sigkilled_leader(
    pg_dsn: str, scheduled_app: str, spawner: Spawner
) -> None:
    argv = ("scheduler", "--app", scheduled_app, "--dsn", pg_dsn, "--lookahead", "2s")
    processes = [spawner.start(*argv), spawner.start(*argv)]
    reader = App(pg_dsn)
    try:
        first = wait_until(lambda: leader_pid(reader), what="a leader")
        assert first in {p.pid for p in processes}
        wait_until(lambda: len(ticks(reader)) >= 5, what="five ticks")
        os.kill(first, signal.SIGKILL)
        killed_at = reader.store.db_now()
        second = wait_until(
            lambda: (pid := leader_pid(reader)) != first and pid, timeout=30, what="a new leader"
        )
        assert second in {p.pid for p in processes} - {first}
        wait_until(
            lambda: any(t > killed_at + timedelta(seconds=4) for t in ticks(reader)),  # type: ignore[operator]
            timeout=30,
            what="ticks after the failover",
        )
        fired = ticks(reader)
    finally:
        reader.close()
    assert len(fired) == len(set(fired)), "a tick fired twice"
    gaps = [b - a for a, b in pairwise(fired)]  # type: ignore[operator]
    assert set(gaps) == {timedelta(seconds=1)}, f"a tick is missing: {gaps}"
    survivor = next(p for p in processes if p.pid == second)
    logs = spawner.log(survivor)
    assert "leads (term" in logs, logs
