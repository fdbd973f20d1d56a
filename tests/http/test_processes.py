"""GET /api/v1/processes on both stores: the fleet registry's document, its read scope, `all`,
and the process gauges of /metrics read from the same records."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import chronoq
from chronoq.cli.main import main
from chronoq.fleet.beacon import task_infos
from chronoq.fleet.records import ProcessInfo
from chronoq.storage.base import ProcessBeatParams

from .conftest import ADMIN, READER


def _beat(
    app: chronoq.App, pid: int, kind: str = "worker", *, ago: float = 0, **fields: Any
) -> str:
    values: dict[str, Any] = {
        "id": f"h:{pid}:x",
        "kind": kind,
        "host": "h",
        "pid": pid,
        "version": "1.2.3",
    } | fields
    now = app.store.db_now() - timedelta(seconds=ago)
    app.store.process_beat(ProcessBeatParams(ProcessInfo(**values), ttl=30, now=now))
    return str(values["id"])


def test_live_processes_with_a_read_token(client: TestClient, app: chronoq.App) -> None:
    tasks = task_infos([app.tasks["send_email"]])
    _beat(app, 1, queues=("emails",), concurrency=4, running=2, tasks=tasks)
    _beat(app, 2, "scheduler", duties=("scheduler",))
    _beat(app, 3, ago=60)
    client.headers["Authorization"] = f"Bearer {READER}"
    response = client.get("/api/v1/processes")
    assert response.status_code == 200, response.text
    document = response.json()
    assert [(p["pid"], p["kind"], p["state"]) for p in document["processes"]] == [
        (1, "worker", "alive"),
        (2, "scheduler", "alive"),
    ]
    worker = document["processes"][0]
    assert (worker["queues"], worker["concurrency"], worker["running"]) == (["emails"], 4, 2)
    (task,) = worker["tasks"]
    assert (task["name"], task["queue"], task["max_attempts"]) == ("send_email", "emails", 3)
    assert [p["name"] for p in task["params"]] == ["to", "subject"]
    assert document["processes"][1]["duties"] == ["scheduler"]


def test_all_adds_those_that_ended(client: TestClient, app: chronoq.App) -> None:
    _beat(app, 1)
    app.store.process_stop(_beat(app, 2))
    _beat(app, 3, ago=60)
    every = client.get("/api/v1/processes", params={"all": "true"}).json()["processes"]
    assert {p["pid"]: p["state"] for p in every} == {1: "alive", 2: "stopped", 3: "gone"}
    stopped = next(p for p in every if p["pid"] == 2)
    assert stopped["stopped_at"] is not None
    assert (
        client.get("/api/v1/processes", params={"all": "false"}).json()["processes"][0]["pid"] == 1
    )
    bad = client.get("/api/v1/processes", params={"all": "maybe"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "all"


def test_none_is_an_empty_list(client: TestClient) -> None:
    document = client.get("/api/v1/processes").json()
    assert document["processes"] == [] and document["db_now"]


def test_a_token_is_required(client: TestClient) -> None:
    del client.headers["Authorization"]
    assert client.get("/api/v1/processes").status_code == 401
    assert (
        client.get("/api/v1/processes", headers={"Authorization": f"Bearer {ADMIN}"}).status_code
        == 200
    )


def test_the_api_and_the_cli_give_the_same_document(
    client: TestClient, app: chronoq.App, dsn: str
) -> None:
    _beat(app, 1, ago=60)  # gone: its record, and so the document, does not change meanwhile
    app.store.process_stop(_beat(app, 2, "server"))
    out = io.StringIO()
    assert (
        main(["processes", "--all", "--json", "--dsn", dsn], stdout=out, stderr=io.StringIO()) == 0
    )
    from_cli = json.loads(out.getvalue())
    from_api = client.get("/api/v1/processes?all=true").json()
    for document in (from_cli, from_api):
        del document["db_now"]
        for process in document["processes"]:
            del process["seen_ago_seconds"]  # measured at each read
    assert from_cli == from_api


def _gauges(text: str) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels.get("kind", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("chronoq_process")
    }


def test_metrics_count_live_processes_per_kind(client: TestClient, app: chronoq.App) -> None:
    assert _gauges(client.get("/metrics").text) == {
        (name, kind): 0.0
        for name in (
            "chronoq_processes",
            "chronoq_process_running_jobs",
            "chronoq_process_concurrency",
        )
        for kind in ("worker", "scheduler", "server")
    }
    _beat(app, 1, concurrency=10, running=4)
    _beat(app, 2, concurrency=5, running=1)
    _beat(app, 3, concurrency=8, running=8, ago=60)  # gone: not counted
    _beat(app, 4, "scheduler", duties=("scheduler",))
    gauges = _gauges(client.get("/metrics").text)
    assert gauges[("chronoq_processes", "worker")] == 2
    assert gauges[("chronoq_process_running_jobs", "worker")] == 5
    assert gauges[("chronoq_process_concurrency", "worker")] == 15
    assert gauges[("chronoq_processes", "scheduler")] == 1
    assert gauges[("chronoq_processes", "server")] == 0
