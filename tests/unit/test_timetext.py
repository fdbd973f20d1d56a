"""How a schedule's instants are written: to the minute, or to the second when it needs them."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from chronoq.core.cron import parse_cadence
from chronoq.core.schedules import Schedule
from chronoq.core.timetext import needs_seconds, schedule_time, schedule_times


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("every 10s", True),
        ("every 90s", True),
        ("every 1s", True),
        ("every 1m", False),
        ("every 2h", False),
        ("*/10 * * * * *", True),
        ("30 * * * * *", True),
        ("0,30 9 * * * *", True),
        ("0 * * * * *", False),
        ("* * * * *", False),
        ("0 9 * * mon-fri", False),
        ("@hourly", False),
    ],
)
def test_a_cadence_needs_seconds_when_it_ticks_off_or_within_the_minute(
    expression: str, seconds: bool
) -> None:
    assert needs_seconds(parse_cadence(expression)) is seconds


def test_any_instant_off_the_minute_needs_seconds() -> None:
    daily = parse_cadence("0 3 * * *")
    on_time = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
    assert not needs_seconds(daily, [on_time, None])
    assert needs_seconds(daily, [on_time, on_time + timedelta(seconds=4)])
    assert needs_seconds(daily, [on_time + timedelta(microseconds=1)])


def test_an_instant_is_written_on_its_own_clock_with_its_offset() -> None:
    paris = datetime(2026, 12, 2, 9, 0, 10, 500, tzinfo=ZoneInfo("Europe/Paris"))
    assert schedule_time(paris, seconds=False) == "2026-12-02 09:00 +01:00"
    assert schedule_time(paris, seconds=True) == "2026-12-02 09:00:10 +01:00"
    st_johns = datetime(2026, 1, 5, 8, 30, tzinfo=timezone(-timedelta(hours=3, minutes=30)))
    assert schedule_time(st_johns, seconds=False) == "2026-01-05 08:30 -03:30"
    assert schedule_time(None, seconds=True) == "-"


def test_a_schedule_whose_zone_no_longer_parses_shows_utc_to_the_second() -> None:
    stored = _schedule(cadence="0 3 * * *", zone="Mars/Olympus")
    moment = datetime(2026, 12, 2, 3, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert schedule_times(stored, [moment, None]) == ["2026-12-02 02:00:00 +00:00", "-"]


def test_a_schedule_shows_its_instants_on_its_own_clock() -> None:
    stored = _schedule(cadence="every 10s", zone="Asia/Tokyo")
    moment = datetime(2026, 12, 2, 0, 0, 10, tzinfo=UTC)
    assert schedule_times(stored, [moment]) == ["2026-12-02 09:00:10 +09:00"]


def _schedule(cadence: str, zone: str) -> Schedule:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    values: dict[str, Any] = {f.name: None for f in fields(Schedule)}
    return Schedule(**values | {"cadence": cadence, "zone": zone, "tick_cursor": now})
