"""`chronoq processes` on both stores, over records written through the store and over real
worker processes; and `chronoq schedule list`'s warning when no scheduler runs."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import pytest

from chronoq import App
from chronoq.fleet.records import ProcessInfo
from chronoq.storage.base import ProcessBeatParams
from tests.helpers import wait_until
from tests.integration.cli_support import Spawner, run_cli
from tests.integration.test_schedules import rewind

WARNING = "warning: no scheduler is running: "


def _beat(app: App, pid: int, kind: str = "worker", *, ago: float = 0, **fields: Any) -> str:
    """Record a process as its beacon does; `ago`: its last beat was that many seconds ago."""
    values: dict[str, Any] = {
        "id": f"host-{pid}:{pid}:abc",
        "kind": kind,
        "host": f"host-{pid}",
        "pid": pid,
        "version": "1.2.3",
    } | fields
    now = app.store.db_now() - timedelta(seconds=ago)
    app.store.process_beat(ProcessBeatParams(ProcessInfo(**values), ttl=30, now=now))
    return str(values["id"])


def _listed(url: str, *options: str) -> list[dict[str, Any]]:
    result = run_cli("processes", "--dsn", url, "--json", *options)
    assert result.code == 0, result.err
    processes: list[dict[str, Any]] = result.json()["processes"]
    return processes


def test_live_processes_in_json(url: str, reader: App) -> None:
    reader.migrate()
    _beat(reader, 1, queues=("emails", "sms"), concurrency=8, running=3)
    _beat(reader, 2, "scheduler", duties=("scheduler",))
    _beat(reader, 3, ago=60)  # stopped refreshing a minute ago: expired
    result = run_cli("processes", "--dsn", url, "--json")
    assert result.code == 0, result.err
    document = result.json()
    assert set(document) == {"db_now", "processes"}
    worker, scheduler = document["processes"]
    assert {k: worker[k] for k in ("id", "kind", "state", "host", "pid", "version")} == {
        "id": "host-1:1:abc",
        "kind": "worker",
        "state": "alive",
        "host": "host-1",
        "pid": 1,
        "version": "1.2.3",
    }
    assert (worker["queues"], worker["concurrency"], worker["running"]) == (["emails", "sms"], 8, 3)
    assert (scheduler["kind"], scheduler["duties"]) == ("scheduler", ["scheduler"])
    assert 0 <= worker["seen_ago_seconds"] < 30


def test_all_adds_the_processes_that_ended_with_their_state(url: str, reader: App) -> None:
    reader.migrate()
    _beat(reader, 1)
    reader.store.process_stop(_beat(reader, 2))
    _beat(reader, 3, ago=60)
    states = {p["pid"]: p["state"] for p in _listed(url, "--all")}
    assert states == {1: "alive", 2: "stopped", 3: "gone"}
    assert [p["pid"] for p in _listed(url)] == [1]


def test_the_table_names_each_process(
    url: str, reader: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a terminal wide enough for every column unclipped
    reader.migrate()
    _beat(reader, 1, queues=("emails",), concurrency=8, running=3)
    reader.store.process_stop(_beat(reader, 2, "scheduler"))
    live = run_cli("processes", "--dsn", url)
    assert live.code == 0 and live.err == ""
    assert "1 live process(es)" in live.out
    assert "worker" in live.out and "host-1:1:abc" in live.out and "host-1/1" in live.out
    assert "3/8" in live.out and "emails" in live.out
    assert "scheduler" not in live.out
    every = run_cli("processes", "--all", "--dsn", url)
    assert "2 process(es), 1 alive" in every.out
    assert "stopped" in every.out and "scheduler" in every.out


def test_no_live_process_is_said_on_stderr(url: str, reader: App) -> None:
    reader.migrate()
    result = run_cli("processes", "--dsn", url)
    assert result.code == 0
    assert "0 live process(es)" in result.out
    assert result.err.startswith("no live process: workers, schedulers and `chronoq serve`")
    assert _listed(url) == []


def test_a_real_worker_is_listed_while_it_runs_and_stopped_after(
    url: str, app_spec: str, spawner: Spawner, reader: App
) -> None:
    reader.migrate()
    worker = spawner.start(
        "worker", "--app", app_spec, "--dsn", url, "--queues", "default", "--concurrency", "3"
    )
    listed = wait_until(
        lambda: [p for p in _listed(url) if p["pid"] == worker.pid], what="the worker's record"
    )
    (record,) = listed
    assert (record["kind"], record["queues"], record["concurrency"]) == ("worker", ["default"], 3)
    assert {task["name"] for task in record["tasks"]} == {"add", "ping", "slow", "wait_for_gate"}
    worker.send_signal(signal.SIGTERM)
    assert spawner.wait(worker) == 0, spawner.log(worker)
    assert _listed(url) == []
    (stopped,) = _listed(url, "--all")
    assert (stopped["pid"], stopped["state"]) == (worker.pid, "stopped")


# -- the no-scheduler warning of `schedule list` --------------------------------------------


def _add_schedule(url: str, name: str = "nightly", cadence: str = "0 3 * * *") -> None:
    added = run_cli(
        "schedule", "add", name, cadence, "--task", "cleanup", "--queue", "default", "--dsn", url
    )
    assert added.code == 0, added.err


def test_schedule_list_warns_when_no_scheduler_runs(url: str, reader: App) -> None:
    _add_schedule(url)
    listed = run_cli("schedule", "list", "--dsn", url)
    assert listed.code == 0
    assert listed.err == (
        f"{WARNING}1 active schedule will not fire until one runs; "
        "start `chronoq scheduler --app MODULE:APP`\n"
    )
    as_json = run_cli("schedule", "list", "--dsn", url, "--json")
    assert as_json.err.startswith(WARNING)
    assert [s["name"] for s in as_json.json()] == ["nightly"]  # stdout stays JSON


def test_schedule_list_marks_overdue_ticks(url: str, reader: App) -> None:
    _add_schedule(url, "every-minute", "* * * * *")
    rewind(reader, "every-minute", reader.store.db_now() - timedelta(minutes=30))
    listed = run_cli("schedule", "list", "--dsn", url)
    assert listed.err.startswith(f"{WARNING}1 schedule is overdue (the oldest by 29m")
    assert "(overdue)" in listed.out


def test_schedule_list_says_nothing_while_a_scheduler_runs_or_all_are_paused(
    url: str, reader: App
) -> None:
    _add_schedule(url)
    _beat(reader, 7, "scheduler")
    assert run_cli("schedule", "list", "--dsn", url).err == ""
    reader.store.process_stop("host-7:7:abc")
    assert run_cli("schedule", "list", "--dsn", url).err.startswith(WARNING)
    assert run_cli("schedule", "pause", "nightly", "--dsn", url).code == 0
    assert run_cli("schedule", "list", "--dsn", url).err == ""
