"""Helpers for tests of the chronoq command: a test app, in-process runs, subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chronoq import App, Job, JobStatus, Outcome
from chronoq.cli.main import main
from chronoq.storage.base import JobClaimParams, JobFinishParams

APP_SOURCE = '''
"""A test app for the chronoq command."""

import threading
import time
from pathlib import Path

import chronoq

app = chronoq.App()


@app.task
def add(a: int, b: int) -> int:
    return a + b


@app.task
async def ping() -> None:
    pass


@app.task
def slow(seconds: float) -> None:
    threading.Event().wait(seconds)  # stands for work that takes `seconds`


@app.task(lease=1.0)
def wait_for_gate(gate: str) -> None:
    """Runs until the test creates the file `gate` (a short lease: rescued soon if killed).
    It first creates `gate` + ".started": the test can tell a running handler from a job that
    its worker has only claimed so far (which a stopping or dying worker gives back unrun)."""
    Path(gate + ".started").touch()
    deadline = time.monotonic() + 60
    while not Path(gate).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {gate} never opened")
        threading.Event().wait(0.02)
'''


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*argv: str) -> Result:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=stdout, stderr=stderr)
    return Result(code, stdout.getvalue(), stderr.getvalue())


def child_pids(parent: int) -> set[int]:
    """Live (not zombie) children of `parent`, read from /proc."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # The command name may contain spaces and parentheses; the fields resume after the last ")".
        state, ppid = text.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == parent and state != "Z":
            found.add(int(stat.parent.name))
    return found


def status(app: App, job_id: int) -> JobStatus | None:
    job = app.get_job(job_id)
    return job.status if job is not None else None


def worker_pid(job: Job) -> int:
    assert job.worker_id is not None
    return int(job.worker_id.split(":")[1])


class Spawner:
    """Starts `python -m chronoq ...` in a directory and kills what is left at teardown."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.strays: set[int] = set()

    def start(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = self.cwd / f"chronoq-{len(self.started)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "chronoq", *argv],
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
            )
        self.started.append((process, log))
        return process

    def log(self, process: subprocess.Popen[bytes]) -> str:
        return next(log.read_text() for p, log in self.started if p is process)

    def wait(self, process: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"chronoq did not exit:\n{self.log(process)}") from None

    def kill_at_teardown(self, pids: set[int]) -> None:
        """Processes that may outlive the one that started them."""
        self.strays |= pids

    def kill_all(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                self.strays |= child_pids(process.pid)
                process.kill()
                process.wait()
        for pid in self.strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def enqueue(url: str, task: str, *options: str) -> int:
    """Enqueue by name. Without `--app` (a producer without the handlers' code, and no worker
    registered yet), on `default` unless the options name a queue."""
    queue = () if {"--queue", "--app"} & set(options) else ("--queue", "default")
    result = run_cli("enqueue", task, "--dsn", url, "--json", *queue, *options)
    assert result.code == 0, result.err
    job_id: int = result.json()["id"]
    return job_id


def finish(app: App, job_id: int, outcome: Outcome) -> None:
    """Claim the job like a worker would and report `outcome` for it."""
    job = app.get_job(job_id)
    assert job is not None
    [claimed] = app.store.job_claim_with_wakeup(JobClaimParams([job.queue], 1, "test:0:0")).jobs
    assert claimed.id == job_id
    app.store.job_finish_many([JobFinishParams(job_id, claimed.lease_token, outcome)])
