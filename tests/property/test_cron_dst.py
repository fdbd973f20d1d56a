"""Hourly cron expressions through every zone's clock changes: ticks strictly increase, each
search answers a tick strictly after its start, and no two ticks are more than an hour apart
(exactly an hour where the clocks move by whole hours)."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from chronoq.core.cron import parse_cadence

ZONES = sorted(zoneinfo.available_timezones() - {"localtime"})
HOUR = timedelta(hours=1)


def first_offset_change(zone: str, year: int) -> datetime:
    """The first instant of `year` at which `zone`'s UTC offset changes (mid-year if none)."""
    tz = zoneinfo.ZoneInfo(zone)
    moment = datetime(year, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(tz).utcoffset()
    for day in range(1, 366):
        later = moment + timedelta(days=day)
        if later.astimezone(tz).utcoffset() != offset:
            low, high = later - timedelta(days=1), later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                low, high = (
                    (middle, high) if middle.astimezone(tz).utcoffset() == offset else (low, middle)
                )
            return high
    return datetime(year, 7, 1, tzinfo=UTC)


def offset_shift(zone: str, change: datetime) -> timedelta:
    """How far `zone`'s clocks move at `change`."""
    tz = zoneinfo.ZoneInfo(zone)
    before = (change - timedelta(seconds=1)).astimezone(tz).utcoffset() or timedelta(0)
    return (change.astimezone(tz).utcoffset() or timedelta(0)) - before


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    year=st.integers(1900, 2037),
    minute=st.integers(0, 59),
    seconds=st.booleans(),
)
def test_hourly_cron_keeps_an_hour_at_most_between_ticks_in_every_zone(
    zone: str, year: int, minute: int, seconds: bool
) -> None:
    expression = f"{'0 ' if seconds else ''}{minute} * * * *"
    cadence = parse_cadence(expression, zone)
    change = first_offset_change(zone, year)
    after, until = change - 3 * HOUR, change + 3 * HOUR
    ticks = cadence.ticks_between(after, until, 100)
    assert ticks and all(after < tick <= until for tick in ticks)
    assert all(earlier < later for earlier, later in pairwise(ticks))
    assert all(later - earlier <= HOUR for earlier, later in pairwise(ticks))
    if offset_shift(zone, change) % HOUR == timedelta(0):
        assert {later - earlier for earlier, later in pairwise(ticks)} <= {HOUR}
    # Walking tick by tick, and starting from just before each tick, finds the same ticks.
    for tick in ticks:
        assert cadence.next_after(tick - timedelta(microseconds=1)) == tick
    walked = [cadence.next_after(after)]
    while walked[-1] < ticks[-1]:
        walked.append(cadence.next_after(walked[-1]))
    assert walked == ticks
