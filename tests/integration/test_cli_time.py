"""The command's time commands: `schedule ...` and `queue ...`, and their answers to bad input."""

from __future__ import annotations

import re

import pytest

from chronoq import App, JobStatus
from tests.integration.cli_support import run_cli

# -- schedule preview -------------------------------------------------------------------------


def test_preview_prints_the_next_instants_with_their_offsets() -> None:
    result = run_cli(
        "schedule", "preview", "30 2 * * *", "--zone", "America/New_York",
        "--from", "2026-03-06T12:00:00+00:00", "--count", "3",
    )  # fmt: skip
    assert result.code == 0, result.err
    # 02:30 does not exist on 8 March (clocks jump from 02:00 to 03:00): it fires at 03:00.
    assert result.out.splitlines() == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]


def test_preview_in_json_and_in_the_southern_hemisphere() -> None:
    result = run_cli(
        "schedule", "preview", "30 2 * * *", "--zone", "Australia/Sydney",
        "--from", "2026-10-02T12:00:00+10:00", "--count", "3", "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.json() == [
        "2026-10-03T02:30:00+10:00",
        "2026-10-04T03:00:00+11:00",
        "2026-10-05T02:30:00+11:00",
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["61 * * * *"], "cron"),
        (["0 9 * * *", "--zone", "Mars/Olympus"], "time zone"),
        (["every 0s"], "interval"),
        (["0 9 * * *", "--from", "2026-01-01T00:00:00"], "UTC offset"),
    ],
)
def test_preview_refuses_bad_input_in_one_line(argv: list[str], words: str) -> None:
    result = run_cli("schedule", "preview", *argv)
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1
    assert words in result.err


# -- schedule add / list / show / pause / resume / remove -------------------------------------


def test_schedule_lifecycle(url: str, app_spec: str, reader: App) -> None:
    added = run_cli(
        "schedule", "add", "nightly-sum", "0 3 * * *", "--task", "add", "--zone", "Europe/Paris",
        "--payload", '{"a": 1, "b": 2}', "--misfire", "catch_up", "--catch-up", "2",
        "--misfire-grace", "10m", "--jitter", "30s", "--app", app_spec, "--dsn", url, "--json",
    )  # fmt: skip
    assert added.code == 0, added.err
    body = added.json()
    assert body["created"] is True
    assert body["schedule"]["misfire"] == "catch_up" and body["schedule"]["catch_up"] == 2
    listed = run_cli("schedule", "list", "--dsn", url, "--json").json()
    assert [s["name"] for s in listed] == ["nightly-sum"]
    shown = run_cli("schedule", "show", "nightly-sum", "--dsn", url)
    assert shown.code == 0
    assert "catch_up 2 after 10m00s" in shown.out
    assert "+01:00" in shown.out or "+02:00" in shown.out  # next ticks in Paris time
    paused = run_cli("schedule", "pause", "nightly-sum", "--dsn", url, "--json").json()
    assert paused["paused"] is True
    resumed = run_cli("schedule", "resume", "nightly-sum", "--dsn", url, "--json").json()
    assert resumed["paused"] is False
    assert run_cli("schedule", "remove", "nightly-sum", "--dsn", url).code == 0
    gone = run_cli("schedule", "show", "nightly-sum", "--dsn", url)
    assert gone.code == 1 and "no schedule named 'nightly-sum'" in gone.err
    assert reader.store.schedule_list() == []


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["bad", "61 * * * *", "--task", "add"], "invalid cron expression"),
        (["bad", "0 9 * * *", "--task", "add", "--zone", "Mars/Olympus"], "unknown time zone"),
        (["bad", "0 9 * * *", "--task", "add", "--misfire-grace=-5s"], "negative"),
        (["bad", "0 9 * * *", "--task", "ad"], "unknown task 'ad'; did you mean 'add'?"),
        (["bad", "0 9 * * *", "--task", "add", "--misfire", "often"], "misfire"),
        (["bad", "0 9 * * *", "--task", "add", "--payload", '{"c": 1}'], "payload"),
        (
            ["bad", "every 1s", "--task", "add", "--jitter", "10m"],
            "jitter 10m00s must be shorter than the shortest interval between two ticks of "
            "'every 1s', 1.0s",
        ),
        (
            ["bad", "*/10 * * * * *", "--task", "add", "--jitter", "10s"],
            "between two ticks of '*/10 * * * * *', 10.0s",
        ),
    ],
)
def test_schedule_add_refuses_bad_input_and_stores_nothing(
    url: str, app_spec: str, reader: App, argv: list[str], words: str
) -> None:
    if "--payload" not in argv:
        argv = [*argv, "--payload", '{"a": 1, "b": 2}']
    result = run_cli("schedule", "add", *argv, "--app", app_spec, "--dsn", url)
    assert result.code == 2, result.err
    assert words in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert reader.store.schedule_list() == []


def test_schedule_times_are_to_the_second_when_it_ticks_within_the_minute(
    url: str, app_spec: str
) -> None:
    for name, cadence in (("tens", "every 10s"), ("nightly", "0 3 * * *")):
        added = run_cli(
            "schedule", "add", name, cadence, "--task", "add", "--zone", "Europe/Paris",
            "--payload", '{"a": 1, "b": 2}', "--app", app_spec, "--dsn", url,
        )  # fmt: skip
        assert added.code == 0, added.err
    tens = run_cli("schedule", "show", "tens", "--dsn", url).out.split("next ticks:\n", 1)[1]
    ticks = [line.strip() for line in tens.splitlines()]
    assert len(ticks) == 5 and len(set(ticks)) == 5, ticks
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d0 \+0[12]:00", t) for t in ticks)
    nightly = run_cli("schedule", "show", "nightly", "--dsn", url).out.split("next ticks:\n")[1]
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\d 03:00 \+0[12]:00", line.strip())
        for line in nightly.splitlines()
    ), nightly


# -- queue ------------------------------------------------------------------------------------


def test_queue_pause_limit_and_list(url: str, reader: App) -> None:
    assert run_cli("queue", "pause", "mail", "--create", "--dsn", url).out == "queue mail: paused\n"
    limited = run_cli(
        "queue", "limit", "mail", "--rate", "200/s", "--concurrency", "5", "--dsn", url, "--json"
    ).json()
    assert limited["rate_per_second"] == 200.0 and limited["burst"] == 10.0
    assert limited["concurrency"] == 5 and limited["paused"] is True
    keyed = run_cli(
        "queue", "limit-key", "mail", "customer:*", "--rate", "5000/m", "--dsn", url, "--json"
    ).json()
    assert keyed["key_limits"][0]["pattern"] == "customer:*"
    listing = run_cli("queue", "list", "--dsn", url)
    assert "mail" in listing.out and "paused" in listing.out and "200/s" in listing.out
    assert run_cli("queue", "resume", "mail", "--dsn", url).code == 0
    cleared = run_cli("queue", "limit", "mail", "--dsn", url, "--json").json()
    assert cleared["rate_per_second"] is None and cleared["concurrency"] is None
    assert run_cli("queue", "unlimit-key", "mail", "customer:*", "--dsn", url).code == 0
    missing = run_cli("queue", "unlimit-key", "mail", "customer:*", "--dsn", url)
    assert missing.code == 1 and "no key limit" in missing.err
    assert reader.store.queue_get("mail").limited is False


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["limit", "mail", "--rate", "fast"], "invalid rate 'fast'"),
        (["limit", "mail", "--rate", "10/s", "--burst", "0"], "burst"),
        (["limit-key", "mail", "k:*", "--rate", "0/s"], "invalid rate"),
    ],
)
def test_queue_limits_refuse_bad_input(url: str, argv: list[str], words: str) -> None:
    result = run_cli("queue", *argv, "--dsn", url)
    assert result.code == 2
    assert words in result.err


def test_enqueue_takes_misfire_and_rate_key(url: str, reader: App) -> None:
    result = run_cli(
        "enqueue", "report", "--queue", "default", "--misfire", "skip", "--misfire-grace", "2m",
        "--rate-key", "customer:7", "--dsn", url, "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    job = reader.get_job(result.json()["id"])
    assert job is not None
    assert (job.misfire, job.misfire_grace, job.rate_key) == ("skip", 120.0, "customer:7")
    assert job.status is JobStatus.PENDING
