"""Every parser of text a user writes, fed arbitrary text: it returns a value or raises chronoq's
own error, never another exception; and where a canonical form exists, reading it back gives the
same value. The command as a whole is fuzzed the same way."""

from __future__ import annotations

import contextlib
import io
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chronoq import App, Config, ConfigError, InvalidDSN, InvalidSchedule
from chronoq.cli.main import main
from chronoq.core.cron import Cadence, IntervalCadence, parse_cadence, preview
from chronoq.core.durations import parse_duration
from chronoq.core.misfire import DEFAULT_GRACE, Misfire, MisfirePolicy, job_misfire
from chronoq.core.ratelimit import MAX_RATE, MIN_RATE, check_burst, check_concurrency, parse_rate
from chronoq.core.validate import MAX_PAYLOAD_DEPTH, check_key, check_name, encode_payload
from chronoq.errors import InvalidDuration, InvalidPayload, PayloadTooLarge
from chronoq.storage.dsn import check_postgres_dsn, redact, sqlite_path, store_kind

HUNDRED_YEARS = timedelta(days=36500)
FAST = settings(max_examples=200, deadline=None)

# Text as hostile as text gets: any code point, lone surrogates, NUL and the characters that
# mean something to SQL, globs, JSON or a shell.
CHARS = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),
    st.sampled_from("\x00\n\t '\"\\%_*?[]{}:/@#-+.,;$"),
)
TEXT = st.text(CHARS, max_size=40)


def words(*atoms: str) -> st.SearchStrategy[str]:
    """Text assembled from `atoms` and arbitrary pieces: closer to valid input than TEXT, so it
    reaches deeper into a parser."""
    return st.lists(st.one_of(st.sampled_from(atoms), TEXT), max_size=6).map("".join)


# -- durations --------------------------------------------------------------------------------

DURATION_ATOMS = (
    *"0123456789",
    *("10", "1.5", ".5", "1e3", "nan", "inf", "-", " ", "_", "\u0661", "\u00b2"),
    *("ms", "s", "m", "h", "d", "w", "M", "H", "sec", "min"),
)
DURATIONS = st.one_of(words(*DURATION_ATOMS), TEXT)


@FAST
@given(DURATIONS)
def test_durations_are_read_or_refused(text: str) -> None:
    try:
        value = parse_duration(text)
    except InvalidDuration:
        return
    assert timedelta(0) <= value <= HUNDRED_YEARS


@FAST
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["ms", "s", "m", "h", "d", "w"])),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([str.lower, str.upper]),
)
def test_durations_add_up_their_parts_whatever_the_case(
    parts: list[tuple[int, str]], case: Any
) -> None:
    text = "".join(f"{count}{unit}" for count, unit in parts)
    seconds = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    total = sum(count * seconds[unit] for count, unit in parts)
    if total > HUNDRED_YEARS.total_seconds():
        with pytest.raises(InvalidDuration, match="longer than 100 years"):
            parse_duration(case(text))
    else:
        assert parse_duration(f"  {case(text)} ") == timedelta(seconds=total)


# -- cadences ---------------------------------------------------------------------------------

CRON_FIELDS = st.one_of(
    st.sampled_from(
        [
            *("*", "?", "L", "W", "LW", "1W", "5L", "mon#2", "*/0", "*/1", "*/15", "1-5"),
            *("5-1", "1,2,3", "jan", "JAN-mar", "sun", "7", "-1", "99999999999999999999"),
            *("0x10", "\uff11"),
        ]
    ),
    st.integers(-5, 100).map(str),
)
CRONS = st.lists(CRON_FIELDS, min_size=1, max_size=7).map(" ".join)
# Mostly valid, and often rare: a search for the next tick may have years to cover.
VALID_CRONS = st.tuples(
    st.sampled_from(["*", "0", "*/15", "5,35", "0-10", "59"]),
    st.sampled_from(["*", "3", "*/6", "9-17", "23"]),
    st.sampled_from(["*", "1", "L", "29", "31", "15W", "LW"]),
    st.sampled_from(["*", "2", "feb", "*/3", "12"]),
    st.sampled_from(["*", "mon", "1-5", "sun#2", "5L", "0"]),
).map(" ".join)
MACROS = st.sampled_from(
    [
        *("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"),
        *("@HOURLY", " @daily ", "@reboot", "@", "@every"),
    ]
)
INTERVALS = st.builds(
    lambda gap, text: f"every{gap}{text}", st.sampled_from(["", " ", "\t"]), DURATIONS
)
VALID_INTERVALS = st.builds(
    lambda count, unit: f"every {count}{unit}",
    st.integers(1, 5200),
    st.sampled_from(["s", "m", "h", "d", "w"]),
)
CADENCES = st.one_of(CRONS, MACROS, INTERVALS, TEXT)
ZONES = st.one_of(
    st.sampled_from(
        [
            *("UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"),
            *("Pacific/Chatham", "Pacific/Kiritimati", "Asia/Kathmandu", "Etc/GMT+12"),
            *("EST5EDT", "Factory", "localtime", "", "../../etc/passwd", "/etc/localtime"),
            *("Europe/../Europe/Paris", "UTC\x00", "europe/paris", "America", "zoneinfo/UTC"),
        ]
    ),
    TEXT,
)
OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14)), ZoneInfo("Europe/Paris")]
)
MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=OFFSETS
)


def _cadence(text: str, zone: str) -> Cadence | None:
    try:
        return parse_cadence(text, zone)
    except InvalidSchedule:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CADENCES, ZONES)
def test_cadences_are_read_or_refused_and_their_text_reads_back_the_same(
    text: str, zone: str
) -> None:
    cadence = _cadence(text, zone)
    if cadence is not None:
        assert parse_cadence(cadence.expression, cadence.zone) == cadence


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(VALID_CRONS, MACROS, VALID_INTERVALS),
    st.sampled_from(["UTC", "Europe/Paris", "Australia/Lord_Howe"]),
    MOMENTS,
)
def test_a_cadence_answers_for_any_instant_or_says_it_cannot(
    text: str, zone: str, moment: datetime
) -> None:
    cadence = _cadence(text, zone)
    assume(cadence is not None)
    assert cadence is not None
    try:
        ticks = preview(cadence, moment, 3)
    except (InvalidSchedule, ConfigError):
        return
    assert len(ticks) == 3
    # As instants: Python orders datetimes of one zone by wall time, ignoring `fold`, so the
    # two 23:00 ticks of an hourly cron in a repeated hour would compare equal.
    instants = [tick.astimezone(UTC) for tick in ticks]
    assert moment.astimezone(UTC) < instants[0] < instants[1] < instants[2]


@FAST
@given(st.integers(1, 100 * 365 * 86400 * 10**6))
def test_an_interval_prints_a_text_that_reads_back_exactly(micros: int) -> None:
    period = timedelta(microseconds=micros)
    if period < timedelta(seconds=1):
        with pytest.raises(InvalidSchedule):
            IntervalCadence(period)
        return
    cadence = IntervalCadence(period)
    assert parse_cadence(cadence.expression) == cadence
    assert parse_duration(cadence.expression.removeprefix("every ")) == period


# -- rates ------------------------------------------------------------------------------------

UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
UNITS |= {"h": 3600, "hour": 3600, "d": 86400, "day": 86400}
RATES = st.one_of(
    words(*"0123456789", "1.5", ".5", "/", " / ", "//", "-", "nan", "inf", "e9", *UNITS, "week"),
    TEXT,
)


@FAST
@given(RATES)
def test_rates_are_read_or_refused(text: str) -> None:
    try:
        rate = parse_rate(text)
    except ConfigError:
        return
    assert MIN_RATE <= rate <= MAX_RATE


@FAST
@given(st.integers(0, 10**8), st.sampled_from(sorted(UNITS)), st.booleans())
def test_a_rate_is_its_count_over_its_unit(count: int, unit: str, shout: bool) -> None:
    text = f" {count} / {unit.upper() if shout else unit} "
    per_second = count / UNITS[unit]
    if MIN_RATE <= per_second <= MAX_RATE:
        assert parse_rate(text) == per_second
    else:
        with pytest.raises(ConfigError, match="at least 1/d and at most 1000000/s"):
            parse_rate(text)


NUMBERS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(10**400), 10**400),
    st.floats(),
    st.text(max_size=5),
)


@FAST
@given(st.floats(MIN_RATE, MAX_RATE), NUMBERS, NUMBERS)
def test_bursts_and_concurrency_are_checked_or_refused(
    rate: float, burst: Any, concurrency: Any
) -> None:
    try:
        size = check_burst(rate, burst)
    except ConfigError:
        pass
    else:
        assert 1 <= size < math.inf
    try:
        limit = check_concurrency(concurrency)
    except ConfigError:
        pass
    else:
        assert limit is None or 1 <= limit <= 2**31 - 1


# -- misfire rules ----------------------------------------------------------------------------

POLICIES = st.one_of(
    st.sampled_from(["run_late", "skip", "coalesce", "catch_up", "RUN-LATE", " Skip ", "skp"]),
    TEXT,
)
GRACES = st.one_of(NUMBERS, DURATIONS, st.timedeltas())
CATCH_UPS = st.one_of(st.none(), st.booleans(), st.integers(-5, 20_000), st.integers())


@FAST
@given(POLICIES, GRACES, CATCH_UPS)
def test_misfire_rules_are_read_or_refused_and_survive_being_stored(
    policy: Any, grace: Any, catch_up: Any
) -> None:
    try:
        rule = Misfire.parse(policy, grace, catch_up)
    except InvalidSchedule:
        return
    assert timedelta(0) <= rule.grace <= HUNDRED_YEARS
    assert rule.grace == DEFAULT_GRACE or grace is not None
    # Stored as text and float seconds, read back as `Schedule.misfire_rule` does.
    stored = timedelta(seconds=rule.grace.total_seconds())
    assert Misfire.parse(str(rule.policy), stored, rule.catch_up) == rule


@FAST
@given(POLICIES, GRACES)
def test_one_off_jobs_take_run_late_or_skip(policy: Any, grace: Any) -> None:
    try:
        rule = job_misfire(policy, grace)
    except InvalidSchedule:
        return
    assert rule.policy in (MisfirePolicy.RUN_LATE, MisfirePolicy.SKIP)


# -- DSNs -------------------------------------------------------------------------------------

DSNS = st.one_of(
    words(
        *("sqlite:///", "sqlite:////", "postgresql://", "postgres://", "u:pw@", "h", ":5432"),
        *("/db", "?", "password=", "host=", "&", ":memory:", "//", "%40", "@", ":"),
    ),
    TEXT,
)


@FAST
@given(DSNS)
def test_dsns_are_read_or_refused_and_redaction_never_fails(dsn: str) -> None:
    shown = redact(dsn)
    assert redact(shown) == shown
    try:
        kind = store_kind(dsn)
    except InvalidDSN:
        kind = None
    try:
        config = Config.load({}, dsn=dsn)
    except ConfigError:
        assert kind is None
    else:
        assert (config.dsn, kind) in ((dsn, "sqlite"), (dsn, "postgres"))
    for check in (sqlite_path, check_postgres_dsn):
        with contextlib.suppress(InvalidDSN):
            check(dsn)


# -- names, keys and payloads ------------------------------------------------------------------

ANYTHING = st.one_of(TEXT, st.none(), st.integers(), st.binary(max_size=4), st.floats())


@FAST
@given(ANYTHING)
def test_names_and_keys_are_accepted_as_given_or_refused(value: Any) -> None:
    for check in (lambda v: check_name("task", v), check_key):
        try:
            accepted = check(value)
        except ConfigError:
            continue
        assert accepted is value or (value is None and accepted is None)
        if isinstance(accepted, str):
            assert "\x00" not in accepted
            accepted.encode("utf-8")


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(CHARS, max_size=10),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(CHARS, max_size=5), inner, max_size=3)
    ),
    max_leaves=20,
)
PAYLOADS = st.one_of(
    st.dictionaries(st.text(CHARS, max_size=5), JSON, max_size=4),
    st.dictionaries(
        st.text(max_size=3), st.one_of(st.sets(st.integers(), max_size=2), st.just(math.nan))
    ),
    JSON,
)


@FAST
@given(PAYLOADS, st.integers(2, 400))
def test_payloads_encode_to_json_that_reads_back_equal_or_are_refused(
    payload: Any, limit: int
) -> None:
    try:
        text = encode_payload("t", payload, limit)
    except PayloadTooLarge:
        assert len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()) > limit
        return
    except InvalidPayload:
        return
    assert json.loads(text) == (payload or {})
    assert "\\u0000" not in text.replace("\\\\", "")
    assert len(text.encode("utf-8")) <= limit


@FAST
@given(st.integers(1, 600))
def test_payload_nesting_has_one_bound(levels: int) -> None:
    payload: Any = {}
    for _ in range(levels - 1):
        payload = {"a": payload}
    if levels <= MAX_PAYLOAD_DEPTH:
        assert json.loads(encode_payload("t", payload, 1 << 20)) == payload
    else:
        with pytest.raises(InvalidPayload, match="nested more than"):
            encode_payload("t", payload, 1 << 20)


# -- the command, fuzzed ----------------------------------------------------------------------

COMMANDS = st.sampled_from(
    [
        ["enqueue"],
        ["jobs", "list"],
        ["jobs", "show"],
        ["jobs", "cancel"],
        ["dead", "list"],
        ["dead", "requeue"],
        ["dead", "purge"],
        ["schedule", "add"],
        ["schedule", "show"],
        ["schedule", "pause"],
        ["schedule", "remove"],
        ["schedule", "preview"],
        ["queue", "pause"],
        ["queue", "limit"],
        ["queue", "limit-key"],
        ["queue", "unlimit-key"],
        ["stats"],
    ]
)
OPTIONS = st.sampled_from(
    [
        *("--payload", "--delay", "--run-at", "--queue", "--key", "--max-attempts", "--priority"),
        *("--misfire", "--misfire-grace", "--rate-key", "--json", "--status", "--limit"),
        *("--all", "--older-than", "--task", "--zone", "--grace", "--catch-up", "--jitter"),
        *("--count", "--from", "--rate", "--burst", "--concurrency", "--", "-1", "1", "0"),
        *("--at", "--tz"),
    ]
)
VALUES = st.one_of(
    OPTIONS,
    CADENCES,
    DURATIONS,
    RATES,
    st.sampled_from(['{"a": 1}', "[1]", '{"a": NaN}', "2030-01-01T00:00:00Z", "2030-01-01"]),
    TEXT,
)


@pytest.fixture(scope="module")
def fuzz_dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("fuzz") / "chronoq.db"
    with App(f"sqlite:///{path}") as app:
        app.enqueue("t", {"a": 1}, key="k")
    return f"sqlite:///{path}"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.tuples(COMMANDS, st.lists(VALUES, max_size=6)).map(lambda t: t[0] + t[1]))
def test_the_command_answers_any_arguments_with_an_exit_code_never_a_traceback(
    fuzz_dsn: str, argv: list[str]
) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--dsn", fuzz_dsn], stdout=out, stderr=err)
    assert code in (0, 1, 2), (code, err.getvalue())
    assert "Traceback" not in err.getvalue() + out.getvalue()
    if code == 2:
        assert err.getvalue().startswith("error: ") and err.getvalue().count("\n") == 1
