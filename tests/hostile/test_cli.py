"""Hostile arguments to the `chronoq` command, on both stores, run in-process through `main()`.

A refused command exits 2 with one line on stderr naming the problem and no traceback; a
look-up of a name that does not exist exits 1 the same way; either leaves the store as it was.
Names and keys the validators allow go in and come back exactly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.hostile.inputs import CJK, INJECTIONS, NAMES
from tests.hostile.support import (
    HTML,
    SEED_LIMITED,
    SEED_PATTERN,
    SEED_SCHEDULE,
    SQL,
    Arena,
    assert_failure,
    assert_usage_error,
)
from tests.integration.cli_support import run_cli

# The API tests try every name and injection; the command only has to pass them through.
CLI_NAMES = [p for p in NAMES if p.id in {"sql", "html", "rtl", "longest-4-byte"}]
CLI_INJECTIONS = [p for p in INJECTIONS if p.id in {"tautology", "stacked"}]


def _nested(levels: int) -> str:
    return '{"a":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


REFUSED: list[Any] = [
    # enqueue: the task, queue and keys
    pytest.param(["enqueue", ""], "task name must be a non-empty", id="task-empty"),
    pytest.param(["enqueue", "   "], "task name must be a non-empty", id="task-blank"),
    pytest.param(["enqueue", "a\nb"], "task name .* control characters", id="task-newline"),
    pytest.param(["enqueue", "a\x00b"], "contains a NUL character", id="task-nul"),
    pytest.param(["enqueue", "bad \udcff"], "is not valid UTF-8", id="task-not-utf8"),
    pytest.param(["enqueue", "t" * 201], "201 characters long", id="task-201"),
    pytest.param(["enqueue", "t" * 1_000_000], "1000000 characters long", id="task-1M"),
    pytest.param(["enqueue", "t", "--queue", ""], "queue name must be a non-empty", id="queue"),
    pytest.param(["enqueue", "t", "--key", ""], "key must be a non-empty", id="key-empty"),
    pytest.param(["enqueue", "t", "--key", "k" * (1 << 20)], "1048576 characters", id="key-1MB"),
    pytest.param(["enqueue", "t", "--key", CJK + "é"], "1802 bytes long", id="key-bytes"),
    pytest.param(["enqueue", "t", "--rate-key", "\udcff"], "not valid UTF-8", id="rate-key"),
    # enqueue: payloads
    pytest.param(["enqueue", "t", "--payload", "[1]"], "got a JSON array", id="payload-array"),
    pytest.param(["enqueue", "t", "--payload", '"x"'], "got a JSON string", id="payload-string"),
    pytest.param(["enqueue", "t", "--payload", "{"], "not valid JSON", id="payload-broken"),
    pytest.param(["enqueue", "t", "--payload", '{"a": NaN}'], "Out of range float", id="nan"),
    pytest.param(["enqueue", "t", "--payload", '{"a": -Infinity}'], "Out of range", id="inf"),
    pytest.param(["enqueue", "t", "--payload", '{"a": 1e999}'], "Out of range float", id="1e999"),
    pytest.param(["enqueue", "t", "--payload", _nested(100_000)], "nested too deeply", id="100k"),
    pytest.param(["enqueue", "t", "--payload", _nested(300)], "nested more than 256", id="300"),
    pytest.param(["enqueue", "t", "--payload", '{"a": "\\u0000"}'], "NUL", id="payload-nul"),
    pytest.param(["enqueue", "t", "--payload", '{"a": "\\ud800"}'], "lone surrogate", id="surr"),
    pytest.param(["enqueue", "t", "--payload", '{"a": ' + "9" * 5000 + "}"], "digits", id="int"),
    pytest.param(
        ["enqueue", "t", "--payload", json.dumps({"a": "x" * (1 << 20)})],
        "bytes encoded; the limit is 1048576",
        id="payload-big",
    ),
    # enqueue: when, and numbers
    pytest.param(["enqueue", "t", "--delay=-5s"], "must not be negative", id="delay-negative"),
    pytest.param(["enqueue", "t", "--delay", "1e300s"], "use forms like", id="delay-1e300"),
    pytest.param(["enqueue", "t", "--delay", "nan"], "not a number", id="delay-nan"),
    pytest.param(["enqueue", "t", "--delay", "36501d"], "longer than 100 years", id="delay-101y"),
    pytest.param(
        ["enqueue", "t", "--delay", "5s", "--run-at", "2030-01-01T00:00:00Z"],
        "not allowed with argument",
        id="delay-and-at",
    ),
    pytest.param(["enqueue", "t", "--run-at", "2030-01-01T09:00"], "has no UTC offset", id="naive"),
    pytest.param(["enqueue", "t", "--run-at", "tomorrow"], "not an ISO 8601", id="at-words"),
    pytest.param(["enqueue", "t", "--run-at", "2030-02-30T00:00Z"], "not an ISO 8601", id="feb-30"),
    pytest.param(
        ["enqueue", "t", "--run-at", "9999-12-31T23:59:59-14:00"],
        "between the years 1 and 9999",
        id="at-after-9999",
    ),
    pytest.param(
        ["enqueue", "t", "--run-at", "0001-01-01T00:00:00+14:00"],
        "between the years 1 and 9999",
        id="at-before-1",
    ),
    pytest.param(
        ["enqueue", "t", "--at", "2030-01-01T00:00:00Z"], "^error: --at is now --run-at$", id="at"
    ),
    pytest.param(
        ["enqueue", "t", "--run-at", "2030-01-01T00:00:00Z", "--at=2030-01-01T00:00:00Z"],
        "--at is now --run-at",
        id="at-and-run-at",
    ),
    pytest.param(["enqueue", "t", "--priority", "2147483648"], "priority must be", id="prio"),
    pytest.param(["enqueue", "t", "--priority", "1.5"], "not a whole number", id="prio-float"),
    pytest.param(["enqueue", "t", "--priority", "9" * 5000], "not a whole number", id="prio-5k"),
    pytest.param(["enqueue", "t", "--max-attempts", "0"], "must be at least 1", id="attempts-0"),
    pytest.param(["enqueue", "t", "--max-attempts", "1001"], "between 1 and 1000", id="att-1001"),
    pytest.param(["enqueue", "t", "--max-attempts", "9" * 30], "at most 9223", id="att-huge"),
    pytest.param(["enqueue", "t", "--misfire", "coalesce"], "invalid choice", id="misfire"),
    pytest.param(
        ["enqueue", "t", "--misfire", "skip", "--misfire-grace", "forever"],
        "invalid duration",
        id="misfire-grace",
    ),
    # schedule add
    pytest.param(
        ["schedule", "add", "", "@daily", "--task", "t"], "schedule name must be", id="sched-name"
    ),
    pytest.param(
        ["schedule", "add", "a\nb", "@daily", "--task", "t"], "control", id="sched-newline"
    ),
    pytest.param(["schedule", "add", "s", "", "--task", "t"], "expression is empty", id="cron-0"),
    pytest.param(["schedule", "add", "s", "61 * * * *", "--task", "t"], "Bad minute", id="cron"),
    pytest.param(["schedule", "add", "s", "@reboot", "--task", "t"], "known macros", id="macro"),
    pytest.param(
        ["schedule", "add", "s", "every 500ms", "--task", "t"], "at least 1s", id="every-500ms"
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--zone", "../../etc/passwd"],
        "unknown time zone",
        id="tz-traversal",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--zone", f"UTC{SQL}"],
        "unknown time zone",
        id="tz-sql",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--zone", "localtime"],
        "depends on the host",
        id="tz-localtime",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--jitter", "2d"],
        "between 0 and 1 day",
        id="jitter-2d",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--jitter=-5s"],
        "negative",
        id="jitter-negative",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--jitter", "inf"],
        "invalid jitter",
        id="jitter-inf",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--misfire-grace=-5s"],
        "must not be negative",
        id="grace-negative",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--misfire-grace", "1e15"],
        "100 years",
        id="grace-1e15",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--tz", "UTC"],
        "^error: --tz is now --zone$",
        id="tz",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--grace=5m"],
        "^error: --grace is now --misfire-grace$",
        id="grace",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--misfire", "catch_up"],
        "needs catch_up",
        id="catch-up-missing",
    ),
    pytest.param(
        [
            "schedule",
            "add",
            "s",
            "@daily",
            "--task",
            "t",
            "--misfire",
            "catch_up",
            "--catch-up",
            "10001",
        ],
        "between 1 and 10000",
        id="catch-up-10001",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--misfire", SQL],
        "unknown misfire policy",
        id="misfire-sql",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--priority", "2147483648"],
        "priority must be",
        id="sched-priority",
    ),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--payload", '{"a": NaN}'],
        "Out of range float",
        id="sched-payload",
    ),
    pytest.param(["schedule", "add", "s", "@daily", "--task", ""], "task name", id="sched-task"),
    pytest.param(
        ["schedule", "add", "s", "@daily", "--task", "t", "--queue", "q\n"],
        "queue name .*control",
        id="sched-queue",
    ),
    # schedule preview
    pytest.param(["schedule", "preview", "@daily", "--tz", "UTC"], "--tz is now --zone", id="p-tz"),
    pytest.param(["schedule", "preview", "@daily", "--count", "0"], "at least 1", id="count-0"),
    pytest.param(
        ["schedule", "preview", "@daily", "--count", "1001"], "at most 1000 ticks", id="count-1001"
    ),
    pytest.param(
        ["schedule", "preview", "every 1s", "--count", "9" * 30], "at most 9223", id="count-huge"
    ),
    pytest.param(
        ["schedule", "preview", "every 36000d", "--from", "9999-01-01T00:00:00Z"],
        "has no tick after",
        id="preview-interval-past-9999",
    ),
    pytest.param(
        ["schedule", "preview", "@yearly", "--from", "9999-06-01T00:00:00+00:00"],
        "no tick within 50 years",
        id="preview-cron-past-9999",
    ),
    pytest.param(
        ["schedule", "preview", "@daily", "--zone", "../../etc/passwd"],
        "unknown time zone",
        id="preview-tz",
    ),
    # queue
    pytest.param(["queue", "pause", ""], "queue name must be a non-empty", id="pause-empty"),
    pytest.param(["queue", "resume", "q\n"], "queue name .*control", id="resume-newline"),
    pytest.param(["queue", "pause", "\udcff"], "not valid UTF-8", id="pause-not-utf8"),
    pytest.param(["queue", "limit", ""], "queue name must be a non-empty", id="limit-empty"),
    pytest.param(["queue", "limit", "q", "--rate", "0/s"], "at least 1/d", id="rate-0"),
    pytest.param(["queue", "limit", "q", "--rate", "0.5/d"], "at least 1/d", id="rate-slow"),
    pytest.param(["queue", "limit", "q", "--rate", "nan/s"], "use forms like", id="rate-nan"),
    pytest.param(["queue", "limit", "q", "--rate", "2000000/s"], "at most", id="rate-fast"),
    pytest.param(["queue", "limit", "q", "--rate", "1/s", "--burst", "inf"], "finite", id="b-inf"),
    pytest.param(["queue", "limit", "q", "--rate", "1/s", "--burst", "nan"], "at least 1", id="n"),
    pytest.param(["queue", "limit", "q", "--rate", "1/s", "--burst=-1"], "at least 1", id="b-1"),
    pytest.param(["queue", "limit", "q", "--burst", "x"], "invalid float value", id="burst-text"),
    pytest.param(["queue", "limit", "q", "--concurrency", "0"], "at least 1", id="concurrency-0"),
    pytest.param(
        ["queue", "limit", "q", "--concurrency", "2147483648"], "at most 2147483647", id="c-2**31"
    ),
    pytest.param(
        ["queue", "limit-key", "", "p", "--rate", "1/s"], "queue name must be", id="key-queue"
    ),
    pytest.param(
        ["queue", "limit-key", "q", "", "--rate", "1/s"], "must be non-empty", id="key-pattern"
    ),
    pytest.param(
        ["queue", "limit-key", "q", "漢" * 601, "--rate", "1/s"], "1800 bytes", id="key-bytes"
    ),
    pytest.param(
        ["queue", "limit-key", "q", "p", "--rate", "1/s", "--burst", "inf"],
        "finite",
        id="key-burst",
    ),
    pytest.param(
        ["queue", "limit-key", "q", "p", "--rate", "0/s"], "at least 1/d", id="key-rate-0"
    ),
    # jobs and dead jobs
    pytest.param(["jobs", "list", "--limit", "9" * 30], "at most 9223", id="list-limit"),
    pytest.param(["jobs", "list", "--status", "pending' OR 1=1"], "unknown status", id="status"),
    pytest.param(["jobs", "show", "abc"], "is not a number", id="show-text"),
    pytest.param(["jobs", "show", "9" * 30], "out of range", id="show-huge"),
    pytest.param(["jobs", "cancel", "0"], "out of range", id="cancel-0"),
    pytest.param(["jobs", "cancel", "-1"], "out of range", id="cancel-negative"),
    pytest.param(["dead", "requeue", "9" * 30], "out of range", id="requeue-huge"),
    pytest.param(["dead", "requeue"], "give the ids", id="requeue-nothing"),
    pytest.param(["dead", "purge", "--older-than", "36501d"], "100 years", id="purge-101y"),
    pytest.param(["dead", "purge", "--older-than=-1d"], "must not be negative", id="purge-neg"),
]


@pytest.mark.parametrize(("argv", "match"), REFUSED)
def test_hostile_arguments_are_refused_in_one_line(
    arena: Arena, argv: list[str], match: str
) -> None:
    assert_usage_error(run_cli(*argv, "--dsn", arena.dsn), match)
    arena.assert_unharmed()


@pytest.mark.parametrize(
    ("dsn", "match"),
    [
        pytest.param("", "the DSN is empty", id="empty"),
        pytest.param("sqlite:///a\x00b.db", "NUL", id="nul"),
        pytest.param("postgresql://u:secret@h\udcff/db", "not valid UTF-8", id="not-utf8"),
        pytest.param("postgresql://u:secret@h:99999/db", "Port out of range", id="port"),
        pytest.param("mysql://u:secret@h/db", "must start with sqlite", id="scheme"),
        pytest.param("sqlite:///:memory:", "name a file", id="memory"),
    ],
)
def test_hostile_dsns_are_refused_without_the_password(dsn: str, match: str) -> None:
    result = run_cli("stats", "--dsn", dsn)
    assert_usage_error(result, match)
    assert "secret" not in result.err


@pytest.mark.parametrize("name", CLI_NAMES)
def test_hostile_names_go_in_and_come_back_exactly(arena: Arena, name: str) -> None:
    payload = json.dumps({name: HTML}, ensure_ascii=False)
    argv = ["enqueue", name, "--queue", name, "--key", name, "--rate-key", name, "--json"]
    first = run_cli(*argv, "--payload", payload, "--dsn", arena.dsn)
    assert (first.code, first.err) == (0, ""), first
    again = run_cli(*argv, "--dsn", arena.dsn)
    assert again.code == 0 and again.err.count("\n") == 1 and "is held by live job" in again.err
    assert again.json() == {"id": first.json()["id"], "created": False}
    shown = run_cli("jobs", "show", str(first.json()["id"]), "--json", "--dsn", arena.dsn).json()
    assert (shown["task"], shown["queue"], shown["key"], shown["rate_key"]) == (name,) * 4
    assert shown["payload"] == {name: HTML}
    listed = run_cli("jobs", "list", "--queue", name, "--task", name, "--json", "--dsn", arena.dsn)
    assert [job["id"] for job in listed.json()] == [first.json()["id"]]
    arena.assert_seeds_intact()


@pytest.mark.parametrize("name", CLI_NAMES)
def test_hostile_names_of_schedules_and_queues_are_administered_exactly(
    arena: Arena, name: str
) -> None:
    def ok(*argv: str) -> Any:
        result = run_cli(*argv, "--json", "--dsn", arena.dsn)
        assert (result.code, result.err) == (0, ""), result
        return result.json()

    # A schedule name may not hold '/': refused in one line, and the schedule is administered
    # under the name with '-' for '/' (its task and queue keep the name as it is).
    schedule = name.replace("/", "-")
    if schedule != name:
        refused = run_cli("schedule", "add", name, "every 1h", "--task", name, "--dsn", arena.dsn)
        assert refused.code == 2 and "contains '/'" in refused.err and refused.err.count("\n") == 1
    added = ok("schedule", "add", schedule, "every 1h", "--task", name, "--queue", name)
    assert (added["created"], added["schedule"]["name"], added["schedule"]["task"]) == (
        True,
        schedule,
        name,
    )
    assert ok("schedule", "show", schedule)["queue"] == name
    assert ok("schedule", "pause", schedule)["paused"] is True
    assert ok("schedule", "resume", schedule)["paused"] is False
    assert ok("schedule", "remove", schedule) == {"removed": True}
    assert ok("queue", "pause", name, "--create")["paused"] is True
    limited = ok("queue", "limit", name, "--rate", "1/d", "--concurrency", "2147483647")
    assert (limited["name"], limited["concurrency"]) == (name, 2147483647)
    keyed = ok("queue", "limit-key", name, name, "--rate", "1000000/s")
    assert [limit["pattern"] for limit in keyed["key_limits"]] == [name]
    assert ok("queue", "unlimit-key", name, name)["key_limits"] == []
    assert name in [queue["name"] for queue in ok("queue", "list")]
    arena.assert_seeds_intact()


@pytest.mark.parametrize("text", CLI_INJECTIONS)
def test_look_ups_of_injected_names_find_nothing_and_change_nothing(
    arena: Arena, text: str
) -> None:
    def run(*argv: str) -> Any:
        return run_cli(*argv, "--dsn", arena.dsn)

    for command in ("show", "pause", "resume", "remove"):
        assert_failure(run("schedule", command, text), "no schedule named")
    assert_failure(run("queue", "unlimit-key", SEED_LIMITED, text), "has no key limit")
    assert_failure(run("queue", "unlimit-key", text, SEED_PATTERN), "has no key limit")
    assert run("jobs", "list", "--queue", text, "--json").json() == []
    assert run("jobs", "list", "--task", text, "--json").json() == []
    assert run("dead", "list", "--queue", text, "--json").json() == []
    requeued = run("dead", "requeue", "--all", "--queue", text, "--json")
    assert (requeued.code, requeued.json()["requeued"]) == (0, [])
    assert run("dead", "purge", "--queue", text, "--json").json() == {"purged": 0}
    arena.assert_unharmed()
    assert SEED_SCHEDULE in arena.snapshot().schedules


@pytest.mark.parametrize(
    ("argv", "lines"),
    [
        pytest.param(["enqueue", "t", "--run-at", "0001-01-01T00:00:00+00:00"], 1, id="at-year-1"),
        pytest.param(["enqueue", "t", "--run-at", "9999-12-31T23:59:59.999999Z"], 1, id="at-9999"),
        pytest.param(["enqueue", "t", "--payload", _nested(256)], 1, id="256-deep"),
        pytest.param(
            ["schedule", "preview", "every 1s", "--from", "9999-12-31T23:00:00Z", "--count=1000"],
            1000,
            id="preview-1000-near-9999",
        ),
        pytest.param(
            ["schedule", "preview", "0 0 29 2 *", "--zone", "Pacific/Kiritimati"], 5, id="leap-days"
        ),
    ],
)
def test_extreme_but_legal_arguments_work(arena: Arena, argv: list[str], lines: int) -> None:
    result = run_cli(*argv, "--dsn", arena.dsn)
    assert (result.code, result.err) == (0, ""), result
    assert result.out.count("\n") == lines
    arena.assert_seeds_intact()
