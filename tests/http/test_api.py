"""The JSON API on both stores: every endpoint, its auth, and its refusals of bad input."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

import chronoq
from chronoq.core.jobs import JobProgress, JobStatus, Outcome
from chronoq.http.auth import TokenTable
from chronoq.storage.base import JobClaimParams, JobFinishParams, JobLeaseRef, JobListParams
from tests.integration.cli_support import run_cli

from .conftest import ADMIN, READER, make_client

LATER = (datetime.now(UTC) + timedelta(hours=1)).isoformat()


def _error(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["message"]
    assert error["field"] == field, error
    return error


def _stored(app: chronoq.App) -> list[dict[str, Any]]:
    return [job.to_json() for job in app.store.job_list(JobListParams(limit=1000))]


def _make_dead(app: chronoq.App, queue: str = "emails", count: int = 1) -> list[int]:
    task = "send_email" if queue == "emails" else "cleanup"
    payload = {"to": "x@example.com"} if queue == "emails" else {}
    ids = [app.enqueue(task, payload).id for _ in range(count)]
    claimed = app.store.job_claim_with_wakeup(JobClaimParams([queue], count, "w")).jobs
    app.store.job_finish_many(
        [
            JobFinishParams(j.id, j.lease_token, Outcome.DEAD, error={"error": "E", "message": "m"})
            for j in claimed
        ]
    )
    return ids


# -- enqueue --------------------------------------------------------------------------------


def test_enqueue_one_and_read_it_back(client: TestClient) -> None:
    body = {"task": "send_email", "payload": {"to": "a@example.com"}, "run_at": LATER, "key": "k1"}
    created = client.post("/api/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert created.json() == {"id": job_id, "created": True}
    job = client.get(f"/api/v1/jobs/{job_id}").json()
    assert (job["task"], job["queue"], job["status"], job["key"]) == (
        "send_email",
        "emails",
        "pending",
        "k1",
    )
    assert datetime.fromisoformat(job["run_at"]) == datetime.fromisoformat(LATER)
    again = client.post("/api/v1/jobs", json=body)
    assert (again.status_code, again.json()) == (200, {"id": job_id, "created": False})


def test_the_job_document_carries_output_and_progress(client: TestClient, app: chronoq.App) -> None:
    done_id, running_id = (app.enqueue("cleanup").id for _ in range(2))
    done, running = app.store.job_claim_with_wakeup(JobClaimParams(["default"], 2, "w")).jobs
    app.store.job_heartbeat_many(
        [JobLeaseRef(running.id, running.lease_token)], {running.id: JobProgress(0.4, "3 of 8")}
    )
    output = '{"removed": 12, "paths": ["a.log"]}'
    app.store.job_finish_many(
        [JobFinishParams(done.id, done.lease_token, Outcome.DONE, output_json=output)]
    )
    finished = client.get(f"/api/v1/jobs/{done.id}").json()
    assert finished["status"] == "done"
    assert finished["output"] == {"removed": 12, "paths": ["a.log"]}
    assert finished["progress"] is None
    reporting = client.get(f"/api/v1/jobs/{running.id}").json()
    assert (reporting["output"], reporting["progress"], reporting["progress_note"]) == (
        None,
        0.4,
        "3 of 8",
    )
    listed = client.get("/api/v1/jobs", params={"status": "done"}).json()["jobs"]
    assert [job["output"] for job in listed] == [finished["output"]]
    assert {done_id, running_id} == {done.id, running.id}


def test_enqueue_with_a_delay(client: TestClient, app: chronoq.App) -> None:
    job_id = client.post("/api/v1/jobs", json={"task": "cleanup", "delay": "4h"}).json()["id"]
    job = app.store.job_get(job_id)
    assert job is not None
    assert (
        timedelta(hours=3, minutes=59) < job.run_at - job.created_at < timedelta(hours=4, minutes=1)
    )


def test_enqueue_a_batch(client: TestClient, app: chronoq.App) -> None:
    jobs = [{"task": "send_email", "payload": {"to": f"{n}@example.com"}} for n in range(3)]
    response = client.post("/api/v1/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    assert [r["created"] for r in results] == [True] * 3
    assert sorted(j["id"] for j in _stored(app)) == sorted(r["id"] for r in results)


@pytest.mark.parametrize(
    ("body", "status", "field", "kind"),
    [
        ({"task": "send_emial", "payload": {"to": "a"}}, 422, "task", "UnknownTask"),
        ({"task": "send_email", "payload": {"too": "a"}}, 422, "payload", "InvalidPayload"),
        (
            {"task": "send_email", "payload": {"to": "x" * 20_000}},
            413,
            "payload",
            "PayloadTooLarge",
        ),
        ({"task": "send_email", "payload": [1, 2]}, 422, "payload", "ValidationError"),
        ({"task": "cleanup", "run_at": "2027-01-01T09:00:00"}, 422, "run_at", "NaiveDatetime"),
        ({"task": "cleanup", "delay": "soon"}, 422, "delay", "InvalidDuration"),
        ({"task": "cleanup", "queue": "nope"}, 422, "queue", "UnknownQueue"),
        ({"task": "cleanup", "run_at": LATER, "delay": 5}, 422, "delay", "ConfigError"),
        ({"task": "cleanup", "colour": "red"}, 422, "colour", "ValidationError"),
        ({"payload": {}}, 422, "task", "ValidationError"),
        ({"task": "cleanup", "key": "a\x00b"}, 422, "key", "ConfigError"),
        ({"task": "cleanup", "priority": 2**40}, 422, "priority", "ConfigError"),
        (
            {"task": "cleanup", "misfire": "skip", "misfire_grace": "-5s"},
            422,
            "misfire_grace",
            None,
        ),
        ({"task": "cleanup", "unique_for": "1h"}, 422, "unique_for", "ConfigError"),
        ({"task": "cleanup", "key": "k", "unique_for": 0}, 422, "unique_for", "InvalidDuration"),
        ({"task": "cleanup", "key": "k", "unique_for": -5}, 422, "unique_for", None),
        ({"task": "cleanup", "key": "k", "unique_for": "-5m"}, 422, "unique_for", None),
        ({"task": "cleanup", "key": "k", "unique_for": "soon"}, 422, "unique_for", None),
    ],
)
def test_bad_jobs_are_refused_by_field(
    client: TestClient,
    app: chronoq.App,
    body: dict[str, Any],
    status: int,
    field: str | None,
    kind: str | None,
) -> None:
    before = _stored(app)
    error = _error(client.post("/api/v1/jobs", json=body), status, field)
    if kind is not None:
        assert error["type"] == kind, error
    assert _stored(app) == before


def test_a_key_unique_for_a_period_returns_the_finished_first_job(
    client: TestClient, app: chronoq.App
) -> None:
    body = {"task": "cleanup", "key": "nightly", "unique_for": "1h"}
    first = client.post("/api/v1/jobs", json=body)
    assert first.status_code == 201, first.text
    job_id = first.json()["id"]
    app.store.job_cancel(job_id)  # finished: the live rule alone would free the key
    again = client.post("/api/v1/jobs", json=body | {"unique_for": 3600})
    assert again.json() == {"id": job_id, "created": False}
    batch = client.post("/api/v1/jobs/batch", json={"jobs": [body, body]})
    assert batch.json()["results"] == [{"id": job_id, "created": False}] * 2


def test_unknown_task_suggests_the_name(client: TestClient) -> None:
    error = _error(client.post("/api/v1/jobs", json={"task": "send_emial"}), 422, "task")
    assert "send_email" in error["message"]


def test_the_old_field_at_is_refused_with_its_new_name(
    client: TestClient, app: chronoq.App
) -> None:
    error = _error(client.post("/api/v1/jobs", json={"task": "cleanup", "at": LATER}), 422, "at")
    assert error["message"] == "at: `at` is now called `run_at`"
    both = {"task": "cleanup", "at": LATER, "run_at": LATER}
    error = _error(client.post("/api/v1/jobs", json=both), 422, "at")
    assert "`at`" in error["message"] and "`run_at`" in error["message"]
    jobs = [{"task": "cleanup"}, {"task": "cleanup", "at": LATER}]
    error = _error(client.post("/api/v1/jobs/batch", json={"jobs": jobs}), 422, "jobs[1].at")
    assert "now called `run_at`" in error["message"]
    assert _stored(app) == []


def test_an_unknown_field_elsewhere_is_not_taken_for_a_renamed_one(client: TestClient) -> None:
    error = _error(client.post("/api/v1/dead/purge", json={"all": True, "at": 1}), 422, "at")
    assert "run_at" not in error["message"]


def test_malformed_json_is_refused(client: TestClient, app: chronoq.App) -> None:
    response = client.post(
        "/api/v1/jobs", content=b'{"task": "cleanup",', headers={"Content-Type": "application/json"}
    )
    assert _error(response, 422, response.json()["error"]["field"])["type"] == "MalformedJSON"
    assert _stored(app) == []


def test_one_bad_job_refuses_the_whole_batch(client: TestClient, app: chronoq.App) -> None:
    jobs = [
        {"task": "cleanup"},
        {"task": "cleanup", "run_at": "2027-01-01T09:00:00+01:00"},
        {"task": "nope"},
    ]
    _error(client.post("/api/v1/jobs/batch", json={"jobs": jobs}), 422, "jobs[2].task")
    naive = [{"task": "cleanup"}, {"task": "cleanup", "run_at": "2027-01-01T09:00:00"}]
    error = _error(client.post("/api/v1/jobs/batch", json={"jobs": naive}), 422, "jobs[1].run_at")
    assert (error["type"], error["message"]) == (
        "NaiveDatetime",
        "jobs[1].run_at has no time zone: give an offset, e.g. 2027-01-01T09:00:00Z",
    )
    _error(client.post("/api/v1/jobs/batch", json={"jobs": []}), 422, "jobs")
    assert _stored(app) == []


# -- auth -----------------------------------------------------------------------------------


def test_requests_without_a_valid_token_are_refused(client: TestClient, app: chronoq.App) -> None:
    del client.headers["Authorization"]
    response = client.get("/api/v1/jobs")
    assert _error(response, 401)["type"] == "Unauthorized"
    assert response.headers["WWW-Authenticate"] == "Bearer"
    wrong = client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {ADMIN}x"})
    assert _error(wrong, 401)["type"] == "InvalidToken"
    basic = client.post(
        "/api/v1/jobs", json={"task": "cleanup"}, headers={"Authorization": "Basic eDp5"}
    )
    _error(basic, 401)
    assert _stored(app) == []


def test_a_read_token_may_look_but_not_change(client: TestClient, app: chronoq.App) -> None:
    client.headers["Authorization"] = f"Bearer {READER}"
    assert client.get("/api/v1/jobs").status_code == 200
    assert client.get("/api/v1/queues").status_code == 200
    _error(client.post("/api/v1/jobs", json={"task": "cleanup"}), 403)
    _error(client.post("/api/v1/dead/requeue", json={"all": True}), 403)
    _error(client.post("/api/v1/queues/emails/pause"), 403)
    assert _stored(app) == []


def test_without_configured_tokens_the_api_is_open(app: chronoq.App) -> None:
    with make_client(app, TokenTable()) as open_client:
        assert open_client.post("/api/v1/jobs", json={"task": "cleanup"}).status_code == 201


# -- search ---------------------------------------------------------------------------------


def test_search_filters_and_pages(client: TestClient, app: chronoq.App) -> None:
    ids = [app.enqueue("send_email", {"to": f"{n}"}, key=f"k{n}").id for n in range(5)]
    ids += [app.enqueue("cleanup").id for _ in range(2)]
    listed = client.get("/api/v1/jobs", params={"task": "send_email"}).json()
    assert [j["id"] for j in listed["jobs"]] == ids[4::-1]
    assert listed["next_cursor"] is None
    assert [j["id"] for j in client.get("/api/v1/jobs", params={"key": "k3"}).json()["jobs"]] == [
        ids[3]
    ]
    by_queue = client.get("/api/v1/jobs", params={"queue": "default", "status": ["pending"]})
    assert [j["id"] for j in by_queue.json()["jobs"]] == ids[:4:-1]
    seen: list[int] = []
    cursor = None
    while True:
        page = client.get(
            "/api/v1/jobs", params={"limit": 3, **({"cursor": cursor} if cursor else {})}
        ).json()
        seen += [j["id"] for j in page["jobs"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert seen == ids[::-1]


def test_search_by_creation_time(client: TestClient, app: chronoq.App) -> None:
    first = app.enqueue("cleanup").id
    job = app.store.job_get(first)
    assert job is not None
    after = (job.created_at + timedelta(microseconds=1)).isoformat()
    second = app.enqueue("cleanup").id
    newer = client.get("/api/v1/jobs", params={"created_after": after}).json()["jobs"]
    older = client.get("/api/v1/jobs", params={"created_before": after}).json()["jobs"]
    assert ([j["id"] for j in newer], [j["id"] for j in older]) == ([second], [first])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"created_after": "2027-01-01T00:00:00"}, "created_after"),
        ({"created_before": "yesterday"}, "created_before"),
        ({"cursor": "abc"}, "cursor"),
        ({"cursor": str(2**64)}, "cursor"),
        ({"cursor": "9" * 5000}, "cursor"),  # past the digits int() converts
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"status": "sleeping"}, "status[0]"),
        ({"queue": "a\x00b"}, "queue"),
        ({"task": ""}, "task"),
        ({"key": "x" * 5000}, "key"),
    ],
)
def test_bad_searches_are_refused_by_field(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    _error(client.get("/api/v1/jobs", params=params), 422, field)


def test_get_and_cancel(client: TestClient, app: chronoq.App) -> None:
    job_id = app.enqueue("cleanup").id
    cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    assert _error(client.post(f"/api/v1/jobs/{job_id}/cancel"), 409)["type"] == "JobFinished"
    _error(client.get("/api/v1/jobs/999999"), 404, "job_id")
    _error(client.post("/api/v1/jobs/999999/cancel"), 404, "job_id")
    _error(client.get("/api/v1/jobs/0"), 422, "job_id")
    _error(client.get(f"/api/v1/jobs/{2**64}"), 422, "job_id")


# -- dead letters ---------------------------------------------------------------------------


def test_dead_list_requeue_and_purge(client: TestClient, app: chronoq.App) -> None:
    emails = _make_dead(app, "emails", 3)
    other = _make_dead(app, "default", 1)
    listed = client.get("/api/v1/dead").json()["jobs"]
    assert [j["id"] for j in listed] == [*other, *emails[::-1]]
    assert listed[0]["errors"][0]["error"] == "E"

    one = client.post("/api/v1/dead/requeue", json={"ids": [emails[0]]}).json()
    assert one == {"requeued": [emails[0]], "key_conflicts": [], "not_dead": [], "not_found": []}
    again = client.post("/api/v1/dead/requeue", json={"ids": [emails[0], 424242]})
    assert (again.status_code, again.json()) == (
        200,
        {"requeued": [], "key_conflicts": [], "not_dead": [emails[0]], "not_found": [424242]},
    )
    by_queue = client.post("/api/v1/dead/requeue", json={"all": True, "queue": "default"}).json()
    assert by_queue["requeued"] == other
    _error(client.post("/api/v1/dead/requeue", json={}), 422, "ids")
    _error(client.post("/api/v1/dead/requeue", json={"ids": [1], "all": True}), 422, "ids")

    _error(client.post("/api/v1/dead/purge", json={}), 422, "ids")
    _error(client.post("/api/v1/dead/purge", json={"older_than": "7d"}), 422, "ids")
    assert client.post("/api/v1/dead/purge", json={"all": True, "older_than": "7d"}).json() == {
        "purged": 0
    }
    assert client.post("/api/v1/dead/purge", json={"ids": [emails[1]]}).json() == {"purged": 1}
    assert client.post("/api/v1/dead/purge", json={"all": True}).json() == {"purged": 1}
    assert client.get("/api/v1/dead").json()["jobs"] == []
    _error(
        client.post("/api/v1/dead/purge", json={"all": True, "older_than": "forever"}),
        422,
        "older_than",
    )


def test_a_purge_age_past_a_century_says_so(client: TestClient) -> None:
    for age in (1e300, 4e9):
        answer = client.post("/api/v1/dead/purge", json={"all": True, "older_than": age})
        error = _error(answer, 422, "older_than")
        assert error == {
            "type": "InvalidDuration",
            "message": "older_than must be between 0 and 100 years",
            "field": "older_than",
        }


# -- schedules and queues -------------------------------------------------------------------


def test_schedules(client: TestClient, app: chronoq.App) -> None:
    [listed] = client.get("/api/v1/schedules").json()
    assert (listed["name"], listed["cadence"], listed["zone"]) == (
        "nightly",
        "0 9 * * *",
        "Europe/Paris",
    )
    assert client.post("/api/v1/schedules/nightly/pause").json()["paused"] is True
    assert client.get("/api/v1/schedules/nightly").json()["paused"] is True
    assert client.post("/api/v1/schedules/nightly/resume").json()["paused"] is False
    fired = client.post("/api/v1/schedules/nightly/trigger")
    assert fired.status_code == 201
    job = client.get(f"/api/v1/jobs/{fired.json()['id']}").json()
    assert (job["task"], job["status"]) == ("cleanup", "pending")
    assert client.get("/api/v1/schedules/nightly").json()["fired"] == 0
    for action in ("pause", "resume", "trigger"):
        _error(client.post(f"/api/v1/schedules/nope/{action}"), 404, "name")
    _error(client.get("/api/v1/schedules/nope"), 404, "name")


def test_queues_and_stats(client: TestClient, app: chronoq.App) -> None:
    app.enqueue("send_email", {"to": "a"})
    app.enqueue("send_email", {"to": "b"}, run_at=datetime.now(UTC) + timedelta(hours=1))
    queues = {q["name"]: q for q in client.get("/api/v1/queues").json()}
    assert (queues["emails"]["pending"], queues["emails"]["due"], queues["emails"]["paused"]) == (
        2,
        1,
        False,
    )
    assert client.post("/api/v1/queues/emails/pause").json()["paused"] is True
    assert client.post("/api/v1/queues/emails/resume").json()["paused"] is False
    stats = client.get("/api/v1/stats").json()
    assert stats["queues"] == {
        "emails": {
            "pending": 2,
            "running": 0,
            "done": 0,
            "dead": 0,
            "cancelled": 0,
            "skipped": 0,
            "total": 2,
        }
    }
    assert stats["totals"] == stats["queues"]["emails"]
    overview = client.get("/api/v1/overview").json()
    assert [q["queue"] for q in overview["queues"]] == ["emails"]
    assert len(overview["throughput"]) == 30
    _error(client.get("/api/v1/overview", params={"window": 86_400, "bucket": 1}), 422, "bucket")


def test_the_api_and_the_cli_give_the_same_stats_document(
    client: TestClient, app: chronoq.App, dsn: str
) -> None:
    _make_dead(app, "emails", 2)
    _make_dead(app, "default")
    app.enqueue("send_email", {"to": "a@example.com"})
    app.store.job_cancel(app.enqueue("cleanup").id)
    printed = run_cli("stats", "--dsn", dsn, "--json")
    assert printed.code == 0, printed.err
    answered = client.get("/api/v1/stats")
    assert answered.status_code == 200
    assert answered.json() == printed.json()
    assert set(answered.json()["totals"]) == {str(status) for status in JobStatus} | {"total"}
    assert (answered.json()["queues"]["emails"]["dead"], answered.json()["totals"]["total"]) == (
        2,
        5,
    )


def test_a_queue_nobody_knows_is_refused_unless_created_and_can_be_removed(
    client: TestClient, app: chronoq.App
) -> None:
    typo = _error(client.post("/api/v1/queues/emials/pause"), 404, "name")
    assert (typo["type"], typo["message"]) == (
        "QueueNotFound",
        "unknown queue 'emials'; did you mean 'emails'?",
    )
    _error(client.post("/api/v1/queues/emials/resume"), 404, "name")
    _error(client.delete("/api/v1/queues/emials"), 404, "name")
    assert app.store.queue_names() == []

    # Declared by a task but without jobs yet: known.
    assert client.post("/api/v1/queues/emails/pause").json()["paused"] is True
    made = client.post("/api/v1/queues/bulk/pause", json={"create": True})
    assert made.json()["paused"] is True
    _error(client.post("/api/v1/queues/bulk/pause", json={"creat": True}), 422, "creat")
    assert [q["name"] for q in client.get("/api/v1/queues").json()] == ["bulk", "emails"]

    assert client.delete("/api/v1/queues/bulk").json() == {"name": "bulk", "removed": True}
    assert [q["name"] for q in client.get("/api/v1/queues").json()] == ["emails"]
    app.enqueue("send_email", {"to": "a"})
    busy = _error(client.delete("/api/v1/queues/emails"), 409, "name")
    assert "1 pending and 0 running" in busy["message"]
    assert client.get("/api/v1/queues").json()[0]["paused"] is True


# -- the document and the metrics -----------------------------------------------------------


def test_openapi_document_lists_every_operation(client: TestClient) -> None:
    document = client.get("/api/v1/openapi.json").json()
    operations = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert ("POST", "/api/v1/jobs") in operations
    assert ("POST", "/api/v1/dead/requeue") in operations
    assert ("POST", "/api/v1/schedules/{name}/trigger") in operations
    assert ("DELETE", "/api/v1/queues/{name}") in operations
    assert ("GET", "/api/v1/processes") in operations
    assert len(operations) == 20
    assert "HTTPBearer" in document["components"]["securitySchemes"]


def test_metrics_count_jobs_enqueued_through_the_api(client: TestClient) -> None:
    client.post("/api/v1/jobs", json={"task": "cleanup"})
    text = client.get("/metrics").text
    assert 'chronoq_jobs_enqueued_total{queue="default",task="cleanup"} 1.0' in text
    assert 'chronoq_queue_depth{queue="default",state="pending"} 1.0' in text


def test_unknown_paths_answer_json(client: TestClient) -> None:
    assert _error(client.get("/api/v1/nothing"), 404)["type"] == "NotFound"
    assert _error(client.delete("/api/v1/jobs"), 405)["type"] == "MethodNotAllowed"


def test_a_body_over_the_limit_is_refused_before_it_is_read(
    client: TestClient, app: chronoq.App
) -> None:
    big = b'{"task": "cleanup", "payload": {"x": "' + b"x" * (17 * 1024 * 1024) + b'"}}'
    declared = client.post(
        "/api/v1/jobs", content=big, headers={"Content-Type": "application/json"}
    )
    assert _error(declared, 413)["type"] == "RequestTooLarge"

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 1 << 20):
            yield big[start : start + (1 << 20)]

    streamed = client.post(
        "/api/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert _error(streamed, 413)["type"] == "RequestTooLarge"
    assert _stored(app) == []
