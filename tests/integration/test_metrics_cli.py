"""`--metrics-port` and `--log-format json` of `chronoq worker` and `chronoq scheduler`, run as
processes: what a Prometheus scraper reads, and what a log shipper gets."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_until
from tests.integration.cli_support import APP_SOURCE, Spawner, enqueue, run_cli

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
BASE_KEYS = {"ts", "level", "logger", "message", "process"}


def scrape(port: int) -> Samples:
    """Every sample of /metrics, parsed as Prometheus would, by name and labels."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The complete lines written so far (the last one may still be on its way)."""
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines()]


def served_ports(spawner: Spawner, process: subprocess.Popen[bytes]) -> dict[int, int]:
    """pid → metrics port, from the processes' "metrics.serve" log lines."""
    return {
        entry["process"]: entry["port"]
        for entry in json_lines(spawner.log(process))
        if entry.get("action") == "metrics.serve"
    }


def scrape_until(port: int, done: Callable[[Samples], bool], what: str) -> Samples:
    return wait_until(lambda: (lambda s: s if done(s) else None)(scrape(port)), what=what)


def stop(spawner: Spawner, process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert spawner.wait(process) == 0, spawner.log(process)


def test_a_worker_serves_metrics_and_writes_json_lines(
    spawner: Spawner, app_spec: str, url: str
) -> None:
    ids = [enqueue(url, "add", "--payload", json.dumps({"a": n, "b": 1})) for n in range(3)]
    process = spawner.start(
        "worker", "--app", app_spec, "--dsn", url, "--metrics-port", "0", "--log-format", "json"
    )
    [port] = wait_until(lambda: served_ports(spawner, process).values(), what="the endpoint")
    add = {"queue": "default", "task": "add"}
    samples = scrape_until(
        port,
        lambda s: sample(s, "chronoq_jobs_completed_total", **add) == 3,
        "three jobs counted done",
    )
    assert sample(samples, "chronoq_jobs_claimed_total", **add) == 3
    assert sample(samples, "chronoq_job_lateness_seconds_count", queue="default") == 3
    assert sample(samples, "chronoq_job_run_seconds_count", queue="default") == 3
    stop(spawner, process)
    entries = json_lines(spawner.log(process))
    assert entries and all(set(entry) >= BASE_KEYS for entry in entries)
    done = [entry for entry in entries if entry.get("action") == "job.done"]
    assert sorted(entry["job_id"] for entry in done) == sorted(ids)
    for entry in done:
        assert (entry["task"], entry["queue"], entry["attempt"]) == ("add", "default", 1)
        assert entry["level"] == "INFO" and entry["logger"] == "chronoq.worker"
        assert entry["ts"].endswith("Z")


def test_supervised_workers_each_serve_their_own_counters(
    spawner: Spawner, app_spec: str, url: str
) -> None:
    for n in range(6):
        enqueue(url, "add", "--payload", json.dumps({"a": n, "b": 1}))
    process = spawner.start(
        "worker",
        *("--app", app_spec, "--dsn", url, "--processes", "2"),
        *("--metrics-port", "0", "--log-format", "json"),
    )
    ports = wait_until(
        lambda: (found := served_ports(spawner, process)) and len(found) == 2 and found,
        what="both workers' endpoints",
    )
    assert process.pid not in ports  # the supervisor runs no jobs and serves nothing

    def completed() -> float:
        add = {"queue": "default", "task": "add"}
        return sum(
            sample(scrape(port), "chronoq_jobs_completed_total", **add) for port in ports.values()
        )

    wait_until(lambda: completed() == 6, what="six jobs counted across the two workers")
    stop(spawner, process)


def test_ports_for_every_supervised_worker_must_exist(app_spec: str, url: str) -> None:
    result = run_cli(
        "worker", "--app", app_spec, "--dsn", url, "--processes", "3", "--metrics-port", "65534"
    )
    assert result.code == 2
    assert "ports 65534 to 65536, past 65535" in result.err


def test_a_metrics_port_in_use_is_a_configuration_error(app_spec: str, url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "worker", "--app", app_spec, "--dsn", url, "--burst", "--metrics-port", str(port)
        )
    assert result.code == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.err


def test_the_scheduler_serves_schedule_counters_and_queue_depths(
    spawner: Spawner, write_app: Callable[[str], str], url: str
) -> None:
    spec = write_app(APP_SOURCE + '\napp.schedule("every 1s", "add", payload={"a": 1, "b": 2})\n')
    process = spawner.start(
        "scheduler", "--app", spec, "--dsn", url, "--metrics-port", "0", "--log-format", "json"
    )
    [port] = wait_until(lambda: served_ports(spawner, process).values(), what="the endpoint")
    samples = scrape_until(
        port,
        lambda s: sample(s, "chronoq_schedule_fires_total", schedule="add") >= 1,
        "a tick fired",
    )
    assert sample(samples, "chronoq_store_up") == 1
    assert sample(samples, "chronoq_leader", duty="scheduler") == 1
    assert sample(samples, "chronoq_leader_changes_total", duty="scheduler") == 1
    assert sample(samples, "chronoq_queue_depth", queue="default", state="pending") >= 1
    assert ("chronoq_queue_oldest_due_age_seconds", frozenset({("queue", "default")})) in samples
    stop(spawner, process)
    entries = json_lines(spawner.log(process))
    assert any(entry.get("action") == "scheduler.elected" for entry in entries)
