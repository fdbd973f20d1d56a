"""The chronoq command, run in-process through `main()` and as `python -m chronoq` subprocesses.

Subprocess tests import a small app module written into `tmp_path` (the command puts the
current directory on `sys.path`, as `python -m` does). Nothing here sleeps to synchronise:
tests wait for a condition with a deadline, or for a process to exit.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chronoq import App, JobStatus, Outcome
from tests.helpers import wait_until
from tests.integration.cli_support import (
    Spawner,
    enqueue,
    finish,
    run_cli,
    status,
)

JOB_KEYS = {
    "id",
    "queue",
    "task",
    "payload",
    "status",
    "priority",
    "run_at",
    "attempts",
    "max_attempts",
    "lease_seconds",
    "lease_token",
    "locked_until",
    "worker_id",
    "key",
    "errors",
    "created_at",
    "started_at",
    "finished_at",
    "misfire",
    "misfire_grace",
    "rate_key",
    "schedule",
    "tick",
    "ticks",
    "fence_rejections",
    "output",
    "progress",
    "progress_note",
}

# -- migrate ----------------------------------------------------------------------------------


def test_migrate_is_idempotent(url: str) -> None:
    first = run_cli("migrate", "--dsn", url, "--json")
    second = run_cli("migrate", "--dsn", url)
    assert first.code == second.code == 0
    assert isinstance(first.json()["applied"], list)
    assert second.out.startswith("up to date")


def test_migrate_applies_to_a_new_sqlite_file(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'new.db'}"
    assert run_cli("migrate", "--dsn", dsn, "--json").json() == {
        "applied": [
            "0001_jobs",
            "0002_time",
            "0003_observe",
            "0004_tier",
            "0005_fleet",
            "0007_output",
            "0008_unique_trace",
        ]
    }
    assert run_cli("migrate", "--dsn", dsn, "--json").json() == {"applied": []}


@pytest.mark.postgres
def test_migrate_on_postgresql_reverts_and_applies_its_own_migration(pg_dsn: str) -> None:
    """0006 (enqueue from SQL), 0009 (the partial status index), 0010 (the running-queue
    index kept off the lease statements), 0011 and 0012 (finish notifications for watched jobs)
    and 0013 (the jobs table's vacuum settings) are PostgreSQL's alone: down to 0005 reverts
    0006 and the newer ones, up applies them again."""
    try:
        down = run_cli("migrate", "--dsn", pg_dsn, "--to", "0005", "--json")
        assert down.json() == {
            "applied": [],
            "reverted": [
                "0013_jobs_vacuum",
                "0012_watched_finish_notify",
                "0011_finish_watched",
                "0010_running_queue_index",
                "0009_status_index",
                "0008_unique_trace",
                "0007_output",
                "0006_enqueue_function",
            ],
        }
        up = run_cli("migrate", "--dsn", pg_dsn)
        assert up.out == (
            "applied 0006_enqueue_function\napplied 0007_output\napplied 0008_unique_trace\n"
            "applied 0009_status_index\napplied 0010_running_queue_index\n"
            "applied 0011_finish_watched\napplied 0012_watched_finish_notify\n"
            "applied 0013_jobs_vacuum\n"
        )
    finally:
        run_cli("migrate", "--dsn", pg_dsn)  # the shared database stays fully migrated
    assert run_cli("migrate", "--dsn", pg_dsn, "--json").json() == {"applied": []}


def test_dsn_is_read_from_the_environment(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_DSN", url)
    job_id = int(run_cli("enqueue", "from_env", "--queue", "default").out)
    assert run_cli("jobs", "show", str(job_id), "--dsn", url, "--json").json()["task"] == "from_env"


# -- enqueue and jobs -------------------------------------------------------------------------


def test_enqueue_list_show_cancel_and_stats(url: str) -> None:
    job_id = enqueue(
        url, "send_email", "--payload", '{"to": "a@example.com"}', "--queue", "mail", "--key", "k1"
    )
    other = enqueue(url, "resize", "--priority", "5", "--max-attempts", "3")

    listed = run_cli("jobs", "list", "--dsn", url, "--json").json()
    assert [job["id"] for job in listed] == [other, job_id]  # newest first
    shown = run_cli("jobs", "show", str(job_id), "--dsn", url, "--json").json()
    assert shown == listed[1]
    assert shown["payload"] == {"to": "a@example.com"}
    assert (shown["queue"], shown["key"], shown["status"]) == ("mail", "k1", "pending")
    assert set(shown) == JOB_KEYS
    assert listed[0]["priority"] == 5
    assert listed[0]["max_attempts"] == 3

    cancelled = run_cli("jobs", "cancel", str(job_id), "--dsn", url)
    assert (cancelled.code, cancelled.out) == (0, f"cancelled job {job_id}\n")
    stats = run_cli("stats", "--dsn", url, "--json").json()
    assert stats["queues"]["mail"] == {
        "pending": 0,
        "running": 0,
        "done": 0,
        "dead": 0,
        "cancelled": 1,
        "skipped": 0,
        "total": 1,
    }
    assert stats["totals"]["total"] == 2
    assert stats["totals"]["pending"] == 1


def test_jobs_list_filters(url: str) -> None:
    first = enqueue(url, "a", "--queue", "q1")
    second = enqueue(url, "b", "--queue", "q2")
    run_cli("jobs", "cancel", str(second), "--dsn", url)

    def ids(*filters: str) -> list[int]:
        return [
            job["id"] for job in run_cli("jobs", "list", "--dsn", url, "--json", *filters).json()
        ]

    assert ids("--status", "cancelled") == [second]
    assert ids("--status", "pending,cancelled") == [second, first]
    assert ids("--queue", "q1") == [first]
    assert ids("--task", "b") == [second]
    assert ids("--limit", "1") == [second]


def test_human_output_shows_the_jobs(url: str) -> None:
    job_id = enqueue(url, "report", "--queue", "nightly")
    listing = run_cli("jobs", "list", "--dsn", url)
    assert listing.code == 0
    assert "report" in listing.out
    assert "nightly" in listing.out
    assert str(job_id) in listing.out
    detail = run_cli("jobs", "show", str(job_id), "--dsn", url)
    assert "report" in detail.out
    assert "pending" in detail.out
    assert "nightly" in run_cli("stats", "--dsn", url).out


def test_a_negative_number_is_a_value_not_an_option(url: str, reader: App) -> None:
    job = reader.get_job(enqueue(url, "low", "--priority", "-5"))
    assert job is not None
    assert job.priority == -5


def test_enqueue_with_delay_and_at(url: str, reader: App) -> None:
    delayed = reader.get_job(enqueue(url, "later", "--delay", "10m"))
    assert delayed is not None
    assert delayed.run_at - delayed.created_at == pytest.approx(
        timedelta(minutes=10), abs=timedelta(seconds=1)
    )

    moment = datetime(2031, 5, 4, 9, 30, tzinfo=UTC)
    at_job = reader.get_job(enqueue(url, "at_time", "--run-at", "2031-05-04T11:30:00+02:00"))
    assert at_job is not None
    assert at_job.run_at == moment


def test_duplicate_key_returns_the_first_job(url: str) -> None:
    first = run_cli("enqueue", "charge", "--queue", "q", "--key", "order-7", "--dsn", url, "--json")
    second = run_cli("enqueue", "charge", "--queue", "q", "--key", "order-7", "--dsn", url)
    assert first.json() == {"id": first.json()["id"], "created": True}
    assert second.code == 0
    assert second.out == f"{first.json()['id']}\n"
    assert "held by live job" in second.err


def test_a_key_unique_for_a_period_returns_the_first_job_once_it_finished(url: str) -> None:
    command = ("enqueue", "charge", "--queue", "q", "--key", "order-8", "--dsn", url)
    first = run_cli(*command, "--unique-for", "1h", "--json")
    job_id = first.json()["id"]
    assert run_cli("jobs", "cancel", str(job_id), "--dsn", url).code == 0
    second = run_cli(*command, "--unique-for", "1h")
    assert second.code == 0
    assert second.out == f"{job_id}\n"
    assert "was taken by job" in second.err
    # Without a period, the live rule alone: the key is free again.
    assert run_cli(*command, "--json").json()["created"] is True


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--unique-for", "1h"), "error: unique_for needs a key"),
        (("--key", "k", "--unique-for", "0"), "error: unique_for must be a positive duration"),
        (("--key", "k", "--unique-for", "-5m"), "error: unique_for: invalid duration '-5m'"),
        (("--key", "k", "--unique-for", "soon"), "error: unique_for: invalid duration 'soon'"),
    ],
)
def test_a_bad_unique_for_is_refused(url: str, options: tuple[str, ...], message: str) -> None:
    refused = run_cli("enqueue", "charge", "--queue", "q", *options, "--dsn", url)
    assert refused.code == 2
    assert refused.err.startswith(message), refused.err
    assert "Traceback" not in refused.err


def test_enqueue_with_app_checks_task_and_payload(url: str, app_spec: str) -> None:
    good = run_cli(
        "enqueue", "add", "--app", app_spec, "--payload", '{"a": 1, "b": 2}', "--dsn", url
    )
    assert good.code == 0
    assert good.out.strip().isdigit()

    unknown = run_cli("enqueue", "ad", "--app", app_spec, "--dsn", url)
    assert unknown.code == 2
    assert unknown.err == "error: unknown task 'ad'; did you mean 'add'?\n"

    misfit = run_cli("enqueue", "add", "--app", app_spec, "--payload", '{"a": 1}', "--dsn", url)
    assert misfit.code == 2
    assert misfit.err.startswith("error: payload does not fit add(")
    assert "'b'" in misfit.err


def test_cancelling_a_finished_job_fails(url: str, reader: App) -> None:
    job_id = enqueue(url, "quick")
    finish(reader, job_id, Outcome.DONE)
    result = run_cli("jobs", "cancel", str(job_id), "--dsn", url)
    assert result.code == 1
    assert (
        result.err
        == f"error: job {job_id} is done; only pending or running jobs can be cancelled\n"
    )


def test_unknown_job_is_an_error(url: str) -> None:
    assert run_cli("migrate", "--dsn", url).code == 0  # a SQLite file must be there to be read
    for command in (["jobs", "show", "424242"], ["jobs", "cancel", "424242"]):
        result = run_cli(*command, "--dsn", url)
        assert (result.code, result.err) == (1, "error: no job with id 424242\n")


# -- dead jobs --------------------------------------------------------------------------------


def make_dead(url: str, app: App, *options: str) -> int:
    job_id = enqueue(url, "doomed", "--max-attempts", "1", *options)
    finish(app, job_id, Outcome.DEAD)
    return job_id


def test_dead_list_requeue_and_purge(url: str, reader: App) -> None:
    dead = [make_dead(url, reader, "--queue", queue) for queue in ("a", "a", "b")]
    enqueue(url, "alive", "--queue", "a")

    listed = run_cli("dead", "list", "--dsn", url, "--json").json()
    assert [job["id"] for job in listed] == dead[::-1]
    assert all(job["status"] == "dead" for job in listed)
    assert [
        j["id"] for j in run_cli("dead", "list", "--queue", "b", "--dsn", url, "--json").json()
    ] == [dead[2]]
    assert "doomed" in run_cli("dead", "list", "--dsn", url).out

    one = run_cli("dead", "requeue", str(dead[0]), "--dsn", url, "--json")
    assert (one.code, one.json()) == (
        0,
        {"requeued": [dead[0]], "key_conflicts": [], "not_dead": [], "not_found": []},
    )
    assert status(reader, dead[0]) == JobStatus.PENDING

    missing = run_cli("dead", "requeue", str(dead[0]), "424242", "--dsn", url)
    assert missing.code == 1
    assert f"not dead jobs: {dead[0]}\n" in missing.out
    assert "no job with id: 424242\n" in missing.out
    as_json = run_cli("dead", "requeue", "424242", "--dsn", url, "--json")
    assert (as_json.code, as_json.json()["not_found"], as_json.json()["not_dead"]) == (
        1,
        [424242],
        [],
    )

    rest = run_cli("dead", "requeue", "--all", "--queue", "b", "--dsn", url, "--json")
    assert rest.json()["requeued"] == [dead[2]]

    assert run_cli("dead", "purge", "--older-than", "7d", "--dsn", url, "--json").json() == {
        "purged": 0
    }
    purged = run_cli("dead", "purge", "--all", "--dsn", url)
    assert (purged.code, purged.out) == (0, "purged 1 dead job(s)\n")
    assert reader.get_job(dead[1]) is None


def test_dead_purge_deletes_every_dead_job_only_with_all(url: str, reader: App) -> None:
    dead = [make_dead(url, reader, "--queue", queue) for queue in ("a", "a", "b", "c")]
    refused = run_cli("dead", "purge", "--dsn", url)
    assert refused.code == 2
    assert "or --all to delete every dead job" in refused.err
    assert all(reader.get_job(job_id) is not None for job_id in dead)

    by_id = run_cli("dead", "purge", str(dead[0]), "424242", "--dsn", url, "--json")
    assert (by_id.code, by_id.json()) == (0, {"purged": 1})
    by_queue = run_cli("dead", "purge", "--queue", "b", "--dsn", url, "--json")
    assert by_queue.json() == {"purged": 1}
    assert [job_id for job_id in dead if reader.get_job(job_id) is not None] == dead[1::2]
    every = run_cli("dead", "purge", "--all", "--dsn", url, "--json")
    assert every.json() == {"purged": 2}


def test_dead_requeue_reports_key_conflicts(url: str, reader: App) -> None:
    dead = make_dead(url, reader, "--key", "invoice-9")
    live = enqueue(url, "doomed", "--key", "invoice-9")  # the key is free again once dead
    assert live != dead

    result = run_cli("dead", "requeue", "--all", "--dsn", url, "--json")
    assert result.code == 1
    assert result.json() == {
        "requeued": [],
        "key_conflicts": [dead],
        "not_dead": [],
        "not_found": [],
    }
    human = run_cli("dead", "requeue", str(dead), "--dsn", url)
    assert f"kept dead 1 job(s) whose key a live job holds: {dead}" in human.out


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "t", "--run-at", "2030-01-01T09:00:00"], "has no UTC offset"),
        (["enqueue", "t", "--run-at", "next tuesday"], "is not an ISO 8601 date-time"),
        (["enqueue", "t", "--delay", "10 parsecs"], "invalid duration '10 parsecs'"),
        (["enqueue", "t", "--payload", '{"a": 1,}'], "argument --payload: not valid JSON"),
        (["enqueue", "t", "--payload", "[1, 2]"], "got a JSON array"),
        (["enqueue", "t", "--delay", "1s", "--run-at", "2030-01-01T09:00:00Z"], "not allowed with"),
        (["jobs", "show", "seven"], "job id 'seven' is not a number"),
        (["jobs", "list", "--status", "finished"], "unknown status 'finished'"),
        (["dead", "requeue"], "give the ids of dead jobs to requeue, or --all"),
        (["dead", "requeue", "1", "--all"], "give the ids of dead jobs to requeue, or --all"),
        (["dead", "purge"], "choose the dead jobs to purge: their ids, --older-than or --queue"),
        (["dead", "purge", "1", "--all"], "give the ids of dead jobs to purge, or --all"),
        (["enqueue", "t", "--delay", "-5m"], "argument --delay: invalid duration '-5m': it must"),
        (["enqueue", "t", "--delay=-5m"], "argument --delay: invalid duration '-5m': it must"),
        (["dead", "purge", "--older-than", "-1d"], "argument --older-than: invalid duration"),
        (["worker"], "the following arguments are required: --app"),
        (["worker", "--app", "x:app", "--concurrency", "0"], "must be at least 1"),
        (["worker", "--app", "x:app", "--event-loop", "trio"], "invalid choice: 'trio'"),
        (["worker", "--app", "no-colon"], "--app must look like MODULE:APP"),
        (["worker", "--app", "no_such_module_here:app"], "no module named 'no_such_module_here'"),
        (["jobs"], "choose a jobs command: list, show, cancel"),
        ([], "choose a command"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["demo", "--jobs", "0"], "argument --jobs: must be between 10 and 5000 to show every"),
        (["demo", "--jobs", "3"], "argument --jobs: must be between 10 and 5000 to show every"),
        (["demo", "--jobs", "5001"], "argument --jobs: must be between 10 and 5000"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, sqlite_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONOQ_DSN", sqlite_dsn)
    result = run_cli(*argv)
    assert result.code == 2, result
    assert result.out == ""
    assert result.err.startswith("error: "), result.err
    assert result.err.count("\n") == 1, result.err
    assert message in result.err


def test_app_errors_name_the_problem(sqlite_dsn: str, app_spec: str) -> None:
    module = app_spec.split(":")[0]
    missing = run_cli("worker", "--app", f"{module}:ap", "--dsn", sqlite_dsn)
    assert missing.err == (
        f"error: --app {module}:ap: {module} has no attribute 'ap'; did you mean {module}:app?\n"
    )
    not_app = run_cli("worker", "--app", f"{module}:add", "--dsn", sqlite_dsn)
    assert not_app.err == f"error: --app {module}:add: add is a Task, not a chronoq.App\n"
    assert missing.code == not_app.code == 2


def test_malformed_dsn_never_shows_its_password() -> None:
    result = run_cli("stats", "--dsn", "postgresql://admin:hunter2@db.example.com:port/jobs")
    assert result.code == 2
    assert result.err.startswith("error: malformed PostgreSQL DSN")
    assert "hunter2" not in result.out + result.err
    assert "admin:***@" in result.err


def test_unknown_dsn_scheme_is_a_usage_error() -> None:
    result = run_cli("stats", "--dsn", "mysql://root:hunter2@localhost/jobs")
    assert result.code == 2
    assert "hunter2" not in result.err
    assert "must start with sqlite:/// or postgresql://" in result.err


def test_unreachable_database_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_CONNECT_TIMEOUT", "1")
    result = run_cli("jobs", "list", "--dsn", "postgresql://u:secret@127.0.0.1:1/x")
    assert result.code == 1
    assert result.err.startswith("error: cannot connect to PostgreSQL at postgresql://u:***@")
    assert result.err.count("\n") == 1
    assert "secret" not in result.out + result.err


def test_help_and_version_go_to_the_given_stream() -> None:
    helped = run_cli("--help")
    assert helped.code == 0
    assert "usage: chronoq" in helped.out
    assert "enqueue" in helped.out
    version = run_cli("--version")
    assert version.code == 0
    assert version.out.startswith("chronoq ")


# -- the worker, as a subprocess --------------------------------------------------------------


def test_worker_burst_drains_and_exits_0(
    url: str, app_spec: str, spawner: Spawner, reader: App
) -> None:
    ids = [enqueue(url, "add", "--payload", json.dumps({"a": n, "b": n})) for n in range(8)]
    ids += [enqueue(url, "ping") for _ in range(4)]

    worker = spawner.start("worker", "--app", app_spec, "--dsn", url, "--burst")

    assert spawner.wait(worker) == 0, spawner.log(worker)
    assert {status(reader, job_id) for job_id in ids} == {JobStatus.DONE}


def test_worker_burst_with_nothing_due_exits_0(url: str, app_spec: str, spawner: Spawner) -> None:
    enqueue(url, "ping", "--delay", "1h")
    worker = spawner.start("worker", "--app", app_spec, "--dsn", url, "--burst")
    assert spawner.wait(worker) == 0, spawner.log(worker)


def test_sigterm_lets_the_running_job_finish(
    url: str, app_spec: str, spawner: Spawner, reader: App
) -> None:
    job_id = enqueue(url, "slow", "--payload", '{"seconds": 2}')
    worker = spawner.start("worker", "--app", app_spec, "--dsn", url)

    wait_until(lambda: status(reader, job_id) == JobStatus.RUNNING, what="job running")
    signalled = datetime.now(UTC)
    worker.send_signal(signal.SIGTERM)

    assert spawner.wait(worker) == 0, spawner.log(worker)
    job = reader.get_job(job_id)
    assert job is not None
    assert job.status == JobStatus.DONE
    assert job.finished_at is not None
    assert job.finished_at > signalled
    assert "received SIGTERM: finishing in-flight jobs" in spawner.log(worker)


def test_worker_exits_when_a_sync_job_outlives_the_grace_period(
    url: str, app_spec: str, spawner: Spawner, reader: App, tmp_path: Path
) -> None:
    never = json.dumps({"gate": str(tmp_path / "never-opened")})
    job_id = enqueue(url, "wait_for_gate", "--app", app_spec, "--payload", never)
    worker = spawner.start("worker", "--app", app_spec, "--dsn", url, "--shutdown-grace", "0.2")
    # Its handler runs: a job only claimed so far would be given back at the stop.
    wait_until((tmp_path / "never-opened.started").exists, what="the job's handler to start")
    assert status(reader, job_id) == JobStatus.RUNNING

    worker.send_signal(signal.SIGTERM)

    # The handler thread cannot be stopped; without the hard exit it would hold the process.
    assert spawner.wait(worker, timeout=20) == 0, spawner.log(worker)
    assert "exiting with 1 job thread(s) still running" in spawner.log(worker)


def test_worker_fails_fast_on_an_unreachable_database(app_spec: str, spawner: Spawner) -> None:
    dsn = "postgresql://u:secret@127.0.0.1:1/x"
    worker = spawner.start(
        "worker", "--app", app_spec, "--dsn", dsn, env={"CHRONOQ_CONNECT_TIMEOUT": "1"}
    )
    assert spawner.wait(worker) == 1
    log = spawner.log(worker)
    assert "error: cannot connect to PostgreSQL at postgresql://u:***@127.0.0.1:1/x" in log
    assert "secret" not in log


# -- the demo ---------------------------------------------------------------------------------


def test_demo_runs_to_completion(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'demo.db'}"
    result = run_cli("demo", "--dsn", dsn, "--jobs", "20")
    assert result.code == 0, result.out + result.err
    assert "summary" in result.out
    assert "2 of 2 expected" in result.out  # the doomed exports ended dead
    assert "created=False" in result.out
    assert "p50" in result.out
    assert "p99" in result.out


def test_demo_refuses_to_reset_a_database_that_is_not_its_own(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'real.db'}"
    job_id = enqueue(dsn, "important")
    result = run_cli("demo", "--dsn", dsn)
    assert result.code == 2
    assert "holds data that is not from the demo" in result.err
    assert run_cli("jobs", "show", str(job_id), "--dsn", dsn).code == 0


# -- queues nobody knows ----------------------------------------------------------------------


def test_a_queue_typo_is_refused_and_an_idle_queue_can_be_removed(url: str, reader: App) -> None:
    enqueue(url, "alive", "--queue", "emails")
    typo = run_cli("queue", "pause", "emials", "--dsn", url)
    assert typo.code == 2
    assert "unknown queue 'emials'; did you mean 'emails'?" in typo.err
    assert run_cli("queue", "limit", "emials", "--concurrency", "2", "--dsn", url).code == 2
    assert reader.store.queue_list() == []

    made = run_cli("queue", "pause", "bulk", "--create", "--dsn", url)
    assert (made.code, made.out) == (0, "queue bulk: paused\n")
    removed = run_cli("queue", "remove", "bulk", "--dsn", url, "--json")
    assert (removed.code, removed.json()) == (0, {"name": "bulk", "removed": True})
    assert reader.store.queue_list() == []
    assert run_cli("queue", "remove", "bulk", "--dsn", url).code == 2

    assert run_cli("queue", "pause", "emails", "--dsn", url).code == 0
    busy = run_cli("queue", "remove", "emails", "--dsn", url)
    assert busy.code == 1
    assert "queue 'emails' has 1 pending and 0 running job(s)" in busy.err
    assert reader.store.queue_get("emails").paused
