"""Real processes, real signals: a worker killed mid-job, and a worker paused past its lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq.core.jobs import JobStatus
from tests.helpers import wait_until

LEASE = 1.0
WORKER_APP = textwrap.dedent(
    """
    import dataclasses, json, os, sys, threading
    from pathlib import Path
    import chronoq

    EFFECTS = Path(os.environ["EFFECTS"])
    RELEASE = Path(os.environ["RELEASE"])
    app = chronoq.App(os.environ["CHRONOQ_DSN"])

    def record(ctx, event):
        line = {"id": ctx.id, "attempt": ctx.attempt, "token": ctx.lease_token,
                "pid": os.getpid(), "event": event}
        with EFFECTS.open("a") as out:
            out.write(json.dumps(line) + "\\n")

    @app.task(lease=LEASE_SECONDS, max_attempts=3)
    def hold(ctx: chronoq.JobContext) -> None:
        record(ctx, "start")
        pause = threading.Event()
        while ctx.attempt == 1 and not RELEASE.exists():
            pause.wait(0.02)
        record(ctx, "end")

    if __name__ == "__main__":
        options = chronoq.WorkerOptions(
            burst="--burst" in sys.argv, poll_interval=0.2, rescue_interval=0.2
        )
        stats = chronoq.Worker(app, options).run()
        print(json.dumps(dataclasses.asdict(stats)), flush=True)
    """
).replace("LEASE_SECONDS", repr(LEASE))


class Fleet:
    """Worker processes started from the script above, all cleaned up at the end."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        self.script = tmp_path / "worker_app.py"
        self.script.write_text(WORKER_APP)
        self.effects = tmp_path / "effects.jsonl"
        self.release = tmp_path / "release"
        self.env = os.environ | {
            "CHRONOQ_DSN": dsn,
            "EFFECTS": str(self.effects),
            "RELEASE": str(self.release),
        }
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(self.script), *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        return process

    def effects_seen(self) -> list[dict[str, Any]]:
        if not self.effects.exists():
            return []
        return [json.loads(line) for line in self.effects.read_text().splitlines() if line]

    def has_effect(self, **wanted: Any) -> bool:
        return any(all(e[k] == v for k, v in wanted.items()) for e in self.effects_seen())

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
            process.communicate(timeout=30)


@pytest.fixture
def fleets(tmp_path: Path) -> Iterator[Callable[[str], Fleet]]:
    made: list[Fleet] = []

    def make(dsn: str) -> Fleet:
        made.append(Fleet(tmp_path, dsn))
        return made[-1]

    yield make
    for fleet in made:
        fleet.stop_all()


def test_job_of_a_worker_killed_mid_job_runs_again_after_its_lease(
    fleets: Callable[[str], Fleet], dsn: str
) -> None:
    fleet = fleets(dsn)
    with chronoq.App(dsn) as app:
        job_id = app.enqueue("hold").id
        first = fleet.start()
        wait_until(lambda: fleet.has_effect(id=job_id, event="start"), what="first attempt")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=20)

        second = fleet.start()
        wait_until(
            lambda: getattr(app.get_job(job_id), "status", None) == JobStatus.DONE,
            timeout=30,
            what="the job to run again on the second worker",
        )
        second.send_signal(signal.SIGTERM)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 0, err

        job = app.get_job(job_id)
        assert job is not None
        assert (job.attempts, job.lease_token) == (2, 2)
        assert job.max_attempts == 3  # enqueued without it; the worker's task setting applies
        assert job.errors[0]["error"] == "LeaseExpired"
        starts = [
            (e["attempt"], e["token"], e["pid"])
            for e in fleet.effects_seen()
            if e["event"] == "start"
        ]
        assert starts == [(1, 1, first.pid), (2, 2, second.pid)]
        assert json.loads(out.splitlines()[-1])["rescued"] == 1


def test_paused_worker_cannot_complete_a_job_another_worker_reclaimed(
    fleets: Callable[[str], Fleet], pg_dsn: str
) -> None:
    # PostgreSQL only: a SQLite worker frozen while it holds the file's write lock would stall
    # every other process on that file, which is SQLite's nature, not a fencing question. The
    # in-process test in test_worker.py covers the same fencing on SQLite.
    fleet = fleets(pg_dsn)
    with chronoq.App(pg_dsn) as app:
        job_id = app.enqueue("hold").id
        paused = fleet.start("--burst")
        wait_until(lambda: fleet.has_effect(id=job_id, event="start"), what="first attempt")
        paused.send_signal(signal.SIGSTOP)

        other = fleet.start()
        wait_until(
            lambda: getattr(app.get_job(job_id), "status", None) == JobStatus.DONE,
            timeout=30,
            what="another worker to rescue and finish the job",
        )
        fleet.release.touch()
        paused.send_signal(signal.SIGCONT)
        out, err = paused.communicate(timeout=30)
        assert paused.returncode == 0, err
        other.send_signal(signal.SIGTERM)
        other.communicate(timeout=30)

        stats = json.loads(out.splitlines()[-1])
        assert stats["lost"] == 1 and stats["done"] == 0
        assert "stale" in err
        job = app.get_job(job_id)
        assert job is not None
        assert (job.status, job.lease_token) == (JobStatus.DONE, 2)
        assert job.worker_id is not None and f":{other.pid}:" in job.worker_id
        ends = [(e["token"], e["pid"]) for e in fleet.effects_seen() if e["event"] == "end"]
        assert sorted(ends) == sorted([(2, other.pid), (1, paused.pid)])
