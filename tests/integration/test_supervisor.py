"""The multi-process supervisor: `chronoq worker --processes M`, and `Supervisor` itself.

End-to-end tests run the command as a subprocess on both stores; the restart policy is tested on
the `Supervisor` class with tiny child programs, waiting on its signals or on its exit.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from chronoq import App, Job, JobStatus
from chronoq.cli.worker import without_option
from chronoq.worker.supervisor import Supervisor, SupervisorOptions, SupervisorSignals
from tests.helpers import wait_until
from tests.integration.cli_support import (
    Spawner,
    child_pids,
    enqueue,
    run_cli,
    status,
    worker_pid,
)

FAST = SupervisorOptions(processes=1, max_restarts=2, backoff_base=0.01, backoff_cap=0.02)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


class Recorder(SupervisorSignals):
    """Counts starts and exits per slot, and lets a test wait for them."""

    def __init__(self) -> None:
        self.starts: Counter[int] = Counter()
        self.exits: list[tuple[int, int]] = []
        self.changed = threading.Condition()

    def started(self, slot: int, pid: int) -> None:
        with self.changed:
            self.starts[slot] += 1
            self.changed.notify_all()

    def exited(self, slot: int, pid: int, code: int) -> None:
        with self.changed:
            self.exits.append((slot, code))
            self.changed.notify_all()

    def wait_for_starts(self, count: int, timeout: float = 20.0) -> None:
        with self.changed:
            started = self.changed.wait_for(lambda: sum(self.starts.values()) >= count, timeout)
        assert started, f"only {sum(self.starts.values())} start(s) after {timeout}s"


# -- end to end -------------------------------------------------------------------------------


def test_two_processes_in_burst_mode_drain_and_exit_0(
    url: str, app_spec: str, spawner: Spawner, reader: App
) -> None:
    ids = [enqueue(url, "add", "--payload", json.dumps({"a": n, "b": 1})) for n in range(30)]

    supervisor = spawner.start(
        "worker", "--app", app_spec, "--dsn", url, "--processes", "2", "--burst"
    )

    assert spawner.wait(supervisor) == 0, spawner.log(supervisor)
    assert {status(reader, job_id) for job_id in ids} == {JobStatus.DONE}
    assert spawner.log(supervisor).count("exited with code 0") == 2


def test_a_child_killed_with_sigkill_is_restarted_and_its_job_rescued(
    url: str, app_spec: str, spawner: Spawner, reader: App, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    payload = json.dumps({"gate": str(gate)})
    # Enqueued through the app so the job carries the task's short lease.
    job_id = enqueue(url, "wait_for_gate", "--app", app_spec, "--payload", payload)
    supervisor = spawner.start(
        "worker", "--app", app_spec, "--dsn", url, "--processes", "2", "--concurrency", "1"
    )
    wait_until(lambda: len(child_pids(supervisor.pid)) == 2, what="two children")
    children = child_pids(supervisor.pid)
    # Its handler runs: a job only claimed so far would be given back unused by the crash.
    wait_until(Path(f"{gate}.started").exists, what=f"job {job_id}'s handler to start")
    running = wait_until(lambda: _running(reader, job_id), what=f"job {job_id} running in a child")
    victim = worker_pid(running)
    assert victim in children

    os.kill(victim, signal.SIGKILL)

    def replaced() -> set[int]:
        pids = child_pids(supervisor.pid)
        return pids if len(pids) == 2 and pids != children else set()

    assert victim not in wait_until(replaced, what="a replacement child")

    # The supervisor fails the killed attempt (its lease is short too): the job runs again in
    # another process. A later attempt counts too: on a loaded machine a 1 s lease can lapse
    # between two heartbeats, and a rescue then starts attempt 3 before the test looks.
    def claimed_again() -> Job | None:
        job = _running(reader, job_id)
        again = job is not None and job.attempts >= 2 and worker_pid(job) != victim
        return job if again else None

    try:
        wait_until(claimed_again, what=f"job {job_id} claimed again")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{spawner.log(supervisor)}") from None
    gate.touch()
    wait_until(lambda: status(reader, job_id) == JobStatus.DONE, what="job done")

    supervisor.send_signal(signal.SIGTERM)
    assert spawner.wait(supervisor) == 0, spawner.log(supervisor)
    log = spawner.log(supervisor)
    assert f"(pid {victim}) was killed by SIGKILL" in log
    assert "restarting worker process" in log
    errors = reader.get_job(job_id).errors  # type: ignore[union-attr]
    assert errors[0]["error"] in {"WorkerCrashed", "LeaseExpired"}, errors


def test_a_child_killed_after_its_job_ended_is_not_said_to_have_died_running_it(
    url: str, app_spec: str, spawner: Spawner, reader: App
) -> None:
    supervisor = spawner.start(
        "worker", "--app", app_spec, "--dsn", url, "--processes", "2", "--concurrency", "1"
    )
    job_id = enqueue(url, "add", "--payload", json.dumps({"a": 1, "b": 2}))
    # Logged after the worker told the supervisor the job ended.
    done = re.compile(rf"job {job_id} add attempt 1/\d+ done in")
    wait_until(lambda: done.search(spawner.log(supervisor)), what=f"job {job_id} done")
    ran = reader.get_job(job_id)
    assert ran is not None and ran.status == JobStatus.DONE

    os.kill(worker_pid(ran), signal.SIGKILL)

    died = re.compile(r"died running job\(s\) (.*); settling")
    said = wait_until(lambda: died.search(spawner.log(supervisor)), what="the death logged")
    restarted = "restarting worker process"
    wait_until(lambda: restarted in spawner.log(supervisor), what="a restart")
    supervisor.send_signal(signal.SIGTERM)
    spawner.wait(supervisor)
    log = spawner.log(supervisor)
    assert said[1] == "none", log
    # No job paid for this crash: it counts against the restart budget.
    assert ": it crashed" in log and "the jobs it ran pay" not in log, log
    assert status(reader, job_id) == JobStatus.DONE


def test_children_stop_when_the_supervisor_is_killed(
    url: str, app_spec: str, spawner: Spawner
) -> None:
    supervisor = spawner.start("worker", "--app", app_spec, "--dsn", url, "--processes", "2")
    wait_until(lambda: spawner.log(supervisor).count(" serving ") == 2, what="two workers")
    children = child_pids(supervisor.pid)
    spawner.kill_at_teardown(children)

    supervisor.kill()
    supervisor.wait()

    wait_until(lambda: not any(map(_alive, children)), what="the orphaned children to stop")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent has not collected it yet


def _running(app: App, job_id: int) -> Job | None:
    job = app.get_job(job_id)
    return job if job is not None and job.status == JobStatus.RUNNING else None


def test_bad_app_fails_before_any_process_starts() -> None:
    result = run_cli("worker", "--app", "no_such_module_xyz:app", "--processes", "3")
    assert result.code == 2
    assert result.err.startswith("error: --app no_such_module_xyz:app: no module named")


# -- the restart policy -----------------------------------------------------------------------


def test_a_crash_looping_child_is_given_up() -> None:
    recorder = Recorder()
    supervisor = Supervisor(python("raise SystemExit(3)"), FAST, signals=recorder)

    assert supervisor.run(install_signal_handlers=False) == 1
    assert recorder.starts[0] == 3  # the first run and max_restarts restarts
    assert recorder.exits == [(0, 3)] * 3


def test_a_child_killed_by_a_signal_is_restarted() -> None:
    recorder = Recorder()
    kill_self = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    supervisor = Supervisor(python(kill_self), FAST, signals=recorder)

    assert supervisor.run(install_signal_handlers=False) == 1
    assert recorder.exits == [(0, -signal.SIGKILL)] * 3


def test_a_configuration_error_is_not_retried() -> None:
    recorder = Recorder()
    options = SupervisorOptions(processes=2, backoff_base=0.01)
    supervisor = Supervisor(python("raise SystemExit(2)"), options, signals=recorder)

    assert supervisor.run(install_signal_handlers=False) == 2
    assert sum(recorder.starts.values()) == 2


def test_children_that_exit_0_are_done() -> None:
    recorder = Recorder()
    supervisor = Supervisor(python("pass"), SupervisorOptions(processes=3), signals=recorder)

    assert supervisor.run(install_signal_handlers=False) == 0
    assert sorted(recorder.exits) == [(0, 0), (1, 0), (2, 0)]


def test_stop_is_forwarded_to_every_child() -> None:
    # Each child waits for SIGTERM and exits 0, as a worker does after a graceful stop.
    waits_for_term = (
        "import signal, threading; stop = threading.Event(); "
        "signal.signal(signal.SIGTERM, lambda *_: stop.set()); stop.wait(60)"
    )
    recorder = Recorder()
    supervisor = Supervisor(
        python(waits_for_term), SupervisorOptions(processes=2), signals=recorder
    )
    codes: list[int] = []
    runner = threading.Thread(
        target=lambda: codes.append(supervisor.run(install_signal_handlers=False))
    )
    runner.start()
    recorder.wait_for_starts(2)

    supervisor.request_stop(signal.SIGTERM)
    runner.join(timeout=30)

    assert not runner.is_alive()
    assert codes == [0]
    # A child signalled before it installed its handler dies of SIGTERM: a clean stop too.
    assert len(recorder.exits) == 2
    assert all(code in (0, -signal.SIGTERM) for _, code in recorder.exits)
    assert supervisor.pids == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["worker", "--processes", "3", "--burst"], ["worker", "--burst"]),
        (["worker", "--processes=3", "--burst"], ["worker", "--burst"]),
        (["--dsn", "x", "worker", "--app", "m:a"], ["--dsn", "x", "worker", "--app", "m:a"]),
    ],
)
def test_children_get_the_same_arguments_without_processes(
    argv: list[str], expected: list[str]
) -> None:
    assert without_option(argv, "--processes") == expected
