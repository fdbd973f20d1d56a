"""Hostile input to schedules (`App.schedule`, `schedule_spec`, `add_schedule`) and rate limits
(`App.limit`, `App.limit_keys`), on both stores: refused with chronoq's own error before
anything is stored, or stored exactly and harmless to the claims that read it."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from chronoq import ChronoqError, ConfigError, InvalidPayload, InvalidSchedule, PayloadTooLarge
from chronoq.storage.base import JobClaimParams
from chronoq.testing import fire_schedules
from tests.hostile.inputs import deep
from tests.hostile.support import HTML, SEED_LIMITED, SEED_SCHEDULE, SQL, Arena, refused

BAD_SCHEDULES = [
    # cadence
    pytest.param({"cadence": ""}, InvalidSchedule, "expression is empty", id="empty"),
    pytest.param({"cadence": " \t "}, InvalidSchedule, "expression is empty", id="blank"),
    pytest.param({"cadence": "not cron"}, InvalidSchedule, "invalid cron", id="words"),
    pytest.param({"cadence": "61 * * * *"}, InvalidSchedule, "Bad minute", id="minute-61"),
    pytest.param({"cadence": "* 24 * * *"}, InvalidSchedule, "Bad hour", id="hour-24"),
    pytest.param({"cadence": "0 0 30 2 *"}, InvalidSchedule, "Bad day-of-month", id="feb-30"),
    pytest.param({"cadence": "*/0 * * * *"}, InvalidSchedule, "invalid cron", id="step-0"),
    pytest.param({"cadence": "9" * 30 + " * * * *"}, InvalidSchedule, "Bad minute", id="huge"),
    pytest.param({"cadence": "* * * * * * *"}, InvalidSchedule, "invalid cron", id="7-fields"),
    pytest.param({"cadence": "0 0 * * * " * 2000}, InvalidSchedule, "invalid cron", id="10k"),
    pytest.param({"cadence": "0 0 * * *\x00"}, InvalidSchedule, "invalid cron", id="nul"),
    pytest.param({"cadence": f"0 0 * * * {SQL}"}, InvalidSchedule, "invalid cron", id="sql"),
    pytest.param({"cadence": "@reboot"}, InvalidSchedule, "known macros", id="reboot"),
    pytest.param({"cadence": "every"}, InvalidSchedule, "invalid interval", id="every"),
    pytest.param({"cadence": "every 0s"}, InvalidSchedule, "positive", id="every-0"),
    pytest.param({"cadence": "every -5s"}, InvalidSchedule, "positive", id="every-negative"),
    pytest.param({"cadence": "every 500ms"}, InvalidSchedule, "at least 1s", id="every-500ms"),
    pytest.param({"cadence": "every 1e300s"}, InvalidSchedule, "interval", id="every-1e300"),
    pytest.param({"cadence": "every nan"}, InvalidSchedule, "not a number", id="every-nan"),
    pytest.param({"cadence": "every 36501d"}, InvalidSchedule, "100 years", id="every-101y"),
    pytest.param({"cadence": 5}, InvalidSchedule, "must be text", id="int"),
    # zone
    pytest.param({"zone": "../../etc/passwd"}, InvalidSchedule, "unknown time zone", id="tz-up"),
    pytest.param({"zone": "/etc/localtime"}, InvalidSchedule, "unknown time zone", id="tz-abs"),
    pytest.param({"zone": "Europe/../Europe/Paris"}, InvalidSchedule, "unknown time", id="tz-.."),
    pytest.param({"zone": "localtime"}, InvalidSchedule, "depends on the host", id="localtime"),
    pytest.param({"zone": f"UTC{SQL}"}, InvalidSchedule, "unknown time zone", id="tz-sql"),
    pytest.param({"zone": "Europe/Paris\x00"}, InvalidSchedule, "did you mean", id="tz-nul"),
    pytest.param({"zone": "Europe/Par\udcffis"}, InvalidSchedule, "unknown time", id="tz-surr"),
    pytest.param({"zone": ""}, InvalidSchedule, "unknown time zone", id="tz-empty"),
    pytest.param({"zone": "Nowhere/Atlantis"}, InvalidSchedule, "unknown time zone", id="tz-no"),
    pytest.param({"zone": "A" * 100_000}, InvalidSchedule, "unknown time zone", id="tz-100k"),
    pytest.param({"zone": 5}, InvalidSchedule, "unknown time zone", id="tz-int"),
    # jitter
    pytest.param({"jitter": -1}, InvalidSchedule, "between 0 and 1 day", id="jitter-neg"),
    pytest.param({"jitter": "-5s"}, InvalidSchedule, "negative", id="jitter-neg-text"),
    pytest.param({"jitter": "2d"}, InvalidSchedule, "between 0 and 1 day", id="jitter-2d"),
    pytest.param({"jitter": 1e300}, InvalidSchedule, "invalid jitter", id="jitter-1e300"),
    pytest.param({"jitter": math.inf}, InvalidSchedule, "between 0 and 1 day", id="jitter-inf"),
    pytest.param({"jitter": math.nan}, InvalidSchedule, "between 0 and 1 day", id="jitter-nan"),
    pytest.param({"jitter": timedelta.max}, InvalidSchedule, "1 day", id="jitter-max"),
    pytest.param({"jitter": True}, InvalidSchedule, "duration such as", id="jitter-bool"),
    # misfire grace and policy
    pytest.param({"misfire_grace": -1}, InvalidSchedule, "must not be negative", id="grace-neg"),
    pytest.param(
        {"misfire_grace": "-5s"}, InvalidSchedule, "must not be negative", id="grace-text"
    ),
    pytest.param({"misfire_grace": timedelta(-1)}, InvalidSchedule, "negative", id="grace-delta"),
    pytest.param({"misfire_grace": math.nan}, InvalidSchedule, "finite", id="grace-nan"),
    pytest.param({"misfire_grace": math.inf}, InvalidSchedule, "finite", id="grace-inf"),
    pytest.param({"misfire_grace": 1e15}, InvalidSchedule, "100 years", id="grace-1e15"),
    pytest.param({"misfire_grace": -1e300}, InvalidSchedule, "100 years", id="grace--1e300"),
    pytest.param({"misfire_grace": timedelta.max}, InvalidSchedule, "100 years", id="grace-max"),
    pytest.param({"misfire": "nope"}, InvalidSchedule, "unknown misfire", id="misfire"),
    pytest.param({"misfire": SQL}, InvalidSchedule, "unknown misfire", id="misfire-sql"),
    pytest.param({"misfire": "catch_up"}, InvalidSchedule, "needs catch_up", id="catch-up-none"),
    pytest.param(
        {"misfire": "catch_up", "catch_up": 0}, InvalidSchedule, "between 1 and", id="catch-up-0"
    ),
    pytest.param(
        {"misfire": "catch_up", "catch_up": 2**70},
        InvalidSchedule,
        "between 1 and 10000",
        id="catch-up-huge",
    ),
    pytest.param(
        {"misfire": "catch_up", "catch_up": True}, InvalidSchedule, "integer", id="catch-up-bool"
    ),
    pytest.param({"catch_up": 3}, InvalidSchedule, "only applies", id="catch-up-coalesce"),
    # what it runs
    pytest.param({"payload": {"a": math.nan}}, InvalidPayload, "not valid JSON", id="nan"),
    pytest.param({"payload": deep(1000)}, InvalidPayload, "nested", id="deep"),
    pytest.param({"payload": {"a": "\x00"}}, InvalidPayload, "NUL", id="payload-nul"),
    pytest.param({"payload": [1]}, InvalidPayload, "JSON object", id="payload-list"),
    pytest.param(
        {"payload": {"a": "x" * (1 << 20)}}, PayloadTooLarge, "the limit is", id="payload-big"
    ),
    pytest.param({"priority": 2**31}, ConfigError, "priority must be", id="priority"),
    pytest.param({"priority": True}, ConfigError, "priority must be", id="priority-bool"),
    pytest.param({"queue": "q\x00"}, ConfigError, "queue name.*control", id="queue-nul"),
    pytest.param({"task": ""}, ConfigError, "task name.*non-empty", id="task-empty"),
    pytest.param({"task": "t\udcff"}, ConfigError, "task name.*UTF-8", id="task-surrogate"),
]


def _spec_args(**overrides: Any) -> dict[str, Any]:
    return {"name": "s", "cadence": "@daily", "task": "plain"} | overrides


@pytest.mark.parametrize(("overrides", "error", "match"), BAD_SCHEDULES)
def test_bad_schedules_are_refused(
    arena: Arena, overrides: dict[str, Any], error: type[ChronoqError], match: str
) -> None:
    args = _spec_args(**overrides)
    declared = {k: v for k, v in args.items() if k not in ("cadence", "task")}
    with refused(error, match):
        arena.app.schedule(args["cadence"], args["task"], **declared)
    assert arena.app.schedules == {}
    with refused(error, match):
        arena.app.add_schedule(arena.app.schedule_spec(**args))
    arena.assert_unharmed()


@pytest.mark.parametrize(
    ("overrides", "expression"),
    [
        pytest.param({"cadence": "every 36500d"}, "every 36500d", id="every-100-years"),
        pytest.param({"cadence": "  @YEARLY  "}, "0 0 1 1 *", id="macro"),
        pytest.param({"cadence": "0 0 29 2 *", "zone": "Pacific/Kiritimati"}, "0 0 29 2 *"),
        pytest.param({"cadence": "*/1 * * * * *"}, "*/1 * * * * *", id="seconds"),
        pytest.param(
            # The widest jitter, a day, on ticks more than a day apart (a daily one is refused).
            {"cadence": "@weekly", "jitter": "1d", "misfire_grace": timedelta(days=36500)},
            "0 0 * * 0",
            id="widest",
        ),
        pytest.param({"misfire": "catch_up", "catch_up": 10_000}, "0 0 * * *", id="catch-up-max"),
    ],
)
def test_extreme_but_legal_schedules_are_stored_and_fire_without_error(
    arena: Arena, overrides: dict[str, Any], expression: str
) -> None:
    app = arena.app
    spec = app.schedule_spec(**_spec_args(**overrides))
    assert app.add_schedule(spec)
    stored = app.store.schedule_get("s")
    assert stored is not None and stored.cadence == expression
    app.schedules["s"] = spec  # as if declared in code: the next pass fires it
    fire_schedules(app)
    arena.assert_seeds_intact()


# -- rate limits --------------------------------------------------------------------------------

BAD_LIMITS = [
    pytest.param({"rate": "0/s"}, "at least 1/d", id="rate-0"),
    pytest.param({"rate": "-1/s"}, "invalid rate", id="rate-negative"),
    pytest.param({"rate": "nan/s"}, "invalid rate", id="rate-nan"),
    pytest.param({"rate": "inf/s"}, "invalid rate", id="rate-inf"),
    pytest.param({"rate": "1e309/s"}, "invalid rate", id="rate-1e309"),
    pytest.param({"rate": "9" * 400 + "/s"}, "at most 1000000/s", id="rate-400-nines"),
    pytest.param({"rate": "0.5/d"}, "at least 1/d", id="rate-below-1/d"),
    pytest.param({"rate": "0." + "0" * 30 + "1/d"}, "at least 1/d", id="rate-tiny"),
    pytest.param({"rate": "1000001/s"}, "at most 1000000/s", id="rate-above-max"),
    pytest.param({"rate": "200/fortnight"}, "use forms like", id="rate-unit"),
    pytest.param({"rate": f"1/s{SQL}"}, "use forms like", id="rate-sql"),
    pytest.param({"rate": ""}, "use forms like", id="rate-empty"),
    pytest.param({"rate": 5}, "must be text", id="rate-int"),
    pytest.param({"rate": "1/s", "burst": 0}, "at least 1", id="burst-0"),
    pytest.param({"rate": "1/s", "burst": 0.5}, "at least 1", id="burst-half"),
    pytest.param({"rate": "1/s", "burst": -1}, "at least 1", id="burst-negative"),
    pytest.param({"rate": "1/s", "burst": math.nan}, "at least 1", id="burst-nan"),
    pytest.param({"rate": "1/s", "burst": math.inf}, "finite", id="burst-inf"),
    pytest.param({"rate": "1/s", "burst": 10**400}, "finite", id="burst-10**400"),
    pytest.param({"rate": "1/s", "burst": True}, "number of jobs", id="burst-bool"),
    pytest.param({"rate": "1/s", "burst": "5"}, "number of jobs", id="burst-text"),
    pytest.param({"concurrency": 0}, "at least 1", id="concurrency-0"),
    pytest.param({"concurrency": -1}, "at least 1", id="concurrency-negative"),
    pytest.param({"concurrency": 2**31}, "at most 2147483647", id="concurrency-2**31"),
    pytest.param({"concurrency": 2**70}, "at most 2147483647", id="concurrency-2**70"),
    pytest.param({"concurrency": True}, "whole number", id="concurrency-bool"),
    pytest.param({"concurrency": 1.5}, "whole number", id="concurrency-float"),
]


@pytest.mark.parametrize(("options", "match"), BAD_LIMITS)
def test_bad_limits_are_refused(arena: Arena, options: dict[str, Any], match: str) -> None:
    with refused(ConfigError, match):
        arena.app.limit("limited", **options)
    if "concurrency" not in options:
        with refused(ConfigError, match):
            arena.app.limit_keys("limited", "tenant:*", **options)
    arena.app.sync_limits()
    arena.assert_unharmed()


@pytest.mark.parametrize(
    ("pattern", "match"),
    [
        pytest.param("", "non-empty", id="empty"),
        pytest.param("a\x00*", "NUL", id="nul"),
        pytest.param("\udcff*", "not valid UTF-8", id="lone-surrogate"),
        pytest.param("k" * 1001, "non-empty text", id="1001-chars"),
        pytest.param("漢" * 601, "longer than 1800 bytes", id="1803-bytes"),
        pytest.param(5, "non-empty text", id="int"),
    ],
)
def test_bad_key_patterns_are_refused(arena: Arena, pattern: object, match: str) -> None:
    with refused(ConfigError, match):
        arena.app.limit_keys("limited", pattern, rate="1/s")  # type: ignore[arg-type]
    arena.app.sync_limits()
    arena.assert_unharmed()


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        pytest.param({"rate": "1/d"}, SQL, id="slowest"),
        pytest.param({"rate": "1000000/s", "burst": 1e308}, HTML, id="fastest-deepest"),
        pytest.param({"concurrency": 2**31 - 1, "rate": "24/d"}, "[!a-z]*🎉'\"", id="widest"),
        pytest.param({"rate": "1/d", "burst": 1}, "漢" * 600, id="1800-byte-pattern"),
    ],
)
def test_extreme_but_legal_limits_are_stored_and_claims_go_on(
    arena: Arena, options: dict[str, Any], pattern: str
) -> None:
    """The slowest rates, biggest bursts and hostile patterns must not break a claim."""
    queue = "limited 'q'"
    arena.app.limit(queue, **options)
    arena.app.limit_keys(queue, pattern, rate=options["rate"], burst=options.get("burst"))
    arena.app.limit_keys(queue, "*", rate="1/d")
    arena.app.sync_limits()
    stored = arena.app.store.queue_get(queue)
    assert {limit.pattern for limit in stored.key_limits} == {pattern, "*"}
    ids = [arena.app.enqueue("plain", queue=queue, rate_key=pattern).id for _ in range(3)]
    claim = JobClaimParams([queue], 10, "hostile:1:1")
    first = arena.app.store.job_claim_with_wakeup(claim).jobs
    assert first and {job.id for job in first} <= set(ids)
    assert arena.app.store.job_claim_with_wakeup(claim).jobs == [] or options["rate"] == "1000000/s"
    # Jobs held back by their key were moved to their turn, which must still be a date.
    for job_id in ids:
        job = arena.app.get_job(job_id)
        assert job is not None and job.run_at.year < 9999
    arena.assert_seeds_intact()


def test_seeded_limits_and_schedules_survive_every_refusal(arena: Arena) -> None:
    """The arena's own limited queue and schedule are what refusals must leave alone."""
    assert arena.before.queues[SEED_LIMITED].rate == 10.0
    assert SEED_SCHEDULE in arena.before.schedules
