"""Cadences of recurring schedules: when a cron expression or an interval ticks.

A cadence is parsed once from text (`parse_cadence`) and answers questions about instants: the
first tick strictly after a moment, the ticks in a half-open span ``(after, until]`` (the first
or the most recent ones), and how many there are. Every input must be an aware datetime; every
tick comes back in UTC, since UTC is how ticks are stored and compared.

Two kinds of text are understood:

- **cron**: what cronsim accepts (five fields, or six with seconds first; names such as ``MON``
  and ``JAN``; ``L``, ``LW`` and ``#``), plus the macros ``@hourly``, ``@daily``, ``@midnight``,
  ``@weekly``, ``@monthly``, ``@yearly`` and ``@annually``, which are stored as their five-field
  forms. The expression is read on the wall clock of the schedule's IANA time zone.
- **interval**: ``every <duration>`` such as ``every 30s`` or ``every 1h30m``, at least one second.
  Interval ticks sit at the Unix epoch plus whole multiples of the interval, in UTC: every process
  computes the same ticks without sharing state, and DST never changes their spacing. The zone of
  an interval only matters for display (`preview`).

Daylight saving time, for cron (cronsim's rules, which follow Debian cron; the tests pin them):

- A five-field expression whose minute and hour fields both start with something other than
  ``*`` (``30 2 * * *``, ``0,30 1 * * *``, ``0 9-17 * * *``) is matched on wall-clock readings;
  so is a six-field one whose seconds field does too (``0 30 2 * * *``), which cronsim would
  run by elapsed time: chronoq runs it as its five-field form moved on by each second.
  A reading that occurs twice when the clocks go back fires once, at its first occurrence (the
  earlier UTC instant). A reading skipped when the clocks go forward fires once, at the first
  instant after the change (02:30 on the spring-forward day in New York fires at 03:00 EDT).
- Any other expression (``0 * * * *``, ``*/15 1 * * *``, ``*/10 * * * * *``) advances by
  elapsed time: ``0 * * * *`` stays one hour apart in UTC through both changes, and
  ``*/30 1 * * *`` fires four times in a repeated 01:00 hour and not at all in a skipped one.
- An expression whose hour field is ``*`` (``45 * * * *``) fires at every instant the wall
  clock reads its minute, and never leaves more than an hour between two ticks: where the clocks
  move by a fraction of an hour (Australia/Lord_Howe, 30 minutes), a reading that would come more
  than an hour after the previous one is preceded by a tick one hour after it. In Lord Howe on
  2026-04-05, ``0 * * * *`` fires at 01:00+11:00, 01:30+10:30 (one hour later), 02:00+10:30.

cronsim's elapsed-time arithmetic assumes a constant offset (it jumps minutes in UTC), so it is
only ever asked about one stretch of constant offset at a time (`_elapsed_readings`); all of the
above, and that ticks strictly increase whatever instant a search starts from, is enforced in
`CronCadence._candidates` and nowhere else.
"""

from __future__ import annotations

import difflib
import hashlib
import heapq
import itertools
import re
import zoneinfo
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from itertools import islice, takewhile
from typing import Protocol

from cronsim import CronSim, CronSimError

from chronoq.core.durations import parse_duration
from chronoq.core.validate import check_aware
from chronoq.errors import InvalidDuration, InvalidSchedule

MIN_INTERVAL = timedelta(seconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
GAP_LOOKAHEAD = timedelta(days=366)  # how far `shortest_gap` looks at a cron expression's ticks
GAP_TICKS = 1000  # and at most how many it looks at
_FIRST_WINDOW = timedelta(hours=1)
_HOUR = timedelta(hours=1)
# After a change of a fraction of an hour, an hourly expression's readings are less than two
# hours apart; looking back that far finds the reading before any instant, when it matters.
_HOURLY_LOOKBACK = 2 * _HOUR
# Offsets are probed this far apart to find where they change: the shortest stretch of one UTC
# offset in tzdata (2025) is about a week, so no change and change back hides between probes.
_OFFSET_PROBE = timedelta(days=1)
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = re.compile(r"every(?:\s+(?P<duration>.*))?", re.IGNORECASE | re.DOTALL)
_INTERVAL_FORMS = "write it like every 30s, every 5m or every 1h30m"
_UNITS_US = (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000))


class Cadence(Protocol):
    """When a schedule ticks. Instants in, UTC instants out; spans are ``(after, until]``."""

    @property
    def expression(self) -> str:
        """The normalised text: parsing it again in the same zone gives an equal cadence."""
        ...

    @property
    def zone(self) -> str:
        """The IANA time zone the expression is read in ("UTC" by default)."""
        ...

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after `moment`."""
        ...

    def ticks_between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """The first `limit` ticks t with after < t <= until, ascending."""
        ...

    def latest(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """The `limit` most recent ticks t with after < t <= until, ascending."""
        ...

    def count_between(self, after: datetime, until: datetime, cap: int) -> int:
        """How many ticks t have after < t <= until, counting no further than `cap`."""
        ...


def parse_cadence(expression: str, zone: str = "UTC") -> Cadence:
    """Read a cron expression, a cron macro or ``every <duration>``, in the IANA `zone`."""
    if not isinstance(expression, str):
        raise InvalidSchedule(f"schedule expression must be text, got {expression!r}")
    if not expression.strip():
        raise InvalidSchedule(
            f"schedule expression is empty ({expression!r}): give a cron expression such as "
            "'0 3 * * *' or an interval such as 'every 5m'"
        )
    if _EVERY.fullmatch(expression.strip()):
        return IntervalCadence(_parse_interval(expression), zone)
    return CronCadence(expression, zone)


@dataclass(frozen=True, slots=True)
class CronCadence:
    """A cron expression read on the wall clock of `zone` (see the module docstring for DST)."""

    expression: str
    zone: str = "UTC"
    _tz: tzinfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Frozen: normalise and validate through object.__setattr__, so a CronCadence built
        # directly is as safe as one from parse_cadence.
        object.__setattr__(self, "expression", _normalise_cron(self.expression))
        object.__setattr__(self, "_tz", zone_info(self.zone))

    def next_after(self, moment: datetime) -> datetime:
        for tick in self._forward(check_aware("moment", moment)):
            return tick
        raise InvalidSchedule(
            f"cron expression {self.expression!r} has no tick within 50 years after "
            f"{moment.isoformat()} (nor before the year 10000)"
        )

    def ticks_between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        _check_count("limit", limit)
        return list(islice(self._within(after, until), limit))

    def latest(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        # Not cronsim's reverse mode: it loops forever in some zones whose clocks change off the
        # hour (Pacific/Chatham, "0 */2 * * *" back from 06:00 on 2026-04-05), and would need
        # the forward search's repairs around Lord Howe's half-hour change. Searching forward
        # over windows reaching back 1h, 4h, 16h... agrees with ticks_between by construction.
        end = _span(after, until)
        _check_count("limit", limit)
        start = after.astimezone(UTC)
        window = _FIRST_WINDOW
        while limit:
            lower = _window_start(start, end, window)
            recent = deque(self._within(lower, end), maxlen=limit)
            if len(recent) == limit or lower == start:
                return list(recent)
            window *= 4
        return []

    def count_between(self, after: datetime, until: datetime, cap: int) -> int:
        _check_count("cap", cap)
        return sum(1 for _ in islice(self._within(after, until), cap))

    def _within(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Ticks in (after, until], ascending, found one at a time."""
        end = _span(after, until)
        return takewhile(lambda tick: tick <= end, self._forward(after))

    def _forward(self, after: datetime) -> Iterator[datetime]:
        """Ticks strictly after `after`, ascending, for as long as cronsim finds any."""
        return _within_datetime_range(self._forward_unbounded(after))

    def _forward_unbounded(self, after: datetime) -> Iterator[datetime]:
        floor = after.astimezone(UTC)
        # A wall-clock expression started on the second reading of a repeated hour is matched
        # from the first reading, so cronsim can yield ticks at or before `after`: drop them.
        for tick in self._candidates(floor):
            if tick > floor:
                floor = tick
                yield tick

    def _candidates(self, after: datetime) -> Iterator[datetime]:
        """Ticks after `after` in UTC, ascending, possibly with some at or before it."""
        if _reads_wall_clock(self.expression):
            yield from _wall_clock_ticks(self.expression, self._tz, after)
        elif _reads_wall_clock_with_seconds(self.expression):
            yield from _wall_clock_ticks_with_seconds(self.expression, self._tz, after)
        elif _is_hourly(self.expression):
            yield from _without_hour_gaps(
                _elapsed_readings(self.expression, self._tz, after - _HOURLY_LOOKBACK)
            )
        else:
            yield from _elapsed_readings(self.expression, self._tz, after)


def _reads_wall_clock(expression: str) -> bool:
    """Whether cronsim matches `expression` on wall-clock readings (Debian cron's rule)."""
    fields = expression.split()
    return len(fields) == 5 and not fields[0].startswith("*") and not fields[1].startswith("*")


def _reads_wall_clock_with_seconds(expression: str) -> bool:
    """Whether a six-field expression names times of day to the second (seconds, minute and
    hour fields all specific): chronoq gives it the five-field rule, which cronsim does not."""
    fields = expression.split()
    return len(fields) == 6 and not any(field.startswith("*") for field in fields[:3])


def _wall_clock_ticks(expression: str, tz: tzinfo, after: datetime) -> Iterator[datetime]:
    for local in CronSim(expression, after.astimezone(tz)):
        yield local.astimezone(UTC)


def _wall_clock_ticks_with_seconds(
    expression: str, tz: tzinfo, after: datetime
) -> Iterator[datetime]:
    """`S M H dom mon dow` as the ticks of `M H dom mon dow` (Debian cron's rule for a time in a
    repeated or skipped hour) moved on by each second in S, merged in order."""
    seconds_field, _, five_fields = expression.partition(" ")
    seconds = sorted(CronSim(f"{seconds_field} * * * * *", _EPOCH).seconds)
    shifted = (
        _shifted(_wall_clock_ticks(five_fields, tz, after - timedelta(seconds=second)), second)
        for second in seconds
    )
    return heapq.merge(*shifted)


def _shifted(ticks: Iterator[datetime], seconds: int) -> Iterator[datetime]:
    return (tick + timedelta(seconds=seconds) for tick in ticks)


def _is_hourly(expression: str) -> bool:
    """Whether the hour field is a plain ``*``: the expression fires in every hour it can."""
    return expression.split()[-4] == "*"


def _elapsed_readings(expression: str, tz: tzinfo, after: datetime) -> Iterator[datetime]:
    """The instants after `after` whose reading on `tz`'s wall clock matches `expression`.

    cronsim's elapsed-time mode jumps minutes and hours in UTC as if the offset never changed,
    so a jump across a change of a fraction of an hour lands past a matching reading (Lord
    Howe, ``45 * * * *``: from 01:00+11:00 it jumps over 01:45+10:30). So cronsim is only
    asked about one stretch of constant offset at a time, on a fixed-offset zone, where its
    arithmetic is exact; at each change the search starts again on the new offset::

        offset A ---------------------|change|-- offset B ------------->
        CronSim(A) from `after`: keep ticks before the change
                                        CronSim(B) from the change: ...
    """
    start = after.astimezone(UTC)
    while True:
        restart = yield from _readings_on_one_offset(expression, tz, start)
        if restart is None:
            return
        start = restart


def _readings_on_one_offset(
    expression: str, tz: tzinfo, start: datetime
) -> Generator[datetime, None, datetime | None]:
    """Readings after `start` up to the next change of `tz`'s offset; returns where the new
    offset begins (None when cronsim has no more ticks)."""
    offset = start.astimezone(tz).utcoffset() or timedelta(0)
    # cronsim drops microseconds and starts one second on: from just before `start`, its
    # first candidate is `start` itself when `start` is a whole second.
    checked = start
    for local in CronSim(expression, (start - _MICROSECOND).astimezone(timezone(offset))):
        tick = local.astimezone(UTC)
        change = _offset_change(tz, checked, tick)
        if change is not None:
            return change
        yield tick
        checked = tick
    return None


def _offset_change(tz: tzinfo, start: datetime, end: datetime) -> datetime | None:
    """The first instant in (start, end] whose UTC offset in `tz` differs from `start`'s."""
    if tz is UTC:
        return None
    offset = start.astimezone(tz).utcoffset()
    low = start
    while low < end:
        high = min(low + _OFFSET_PROBE, end)
        if high.astimezone(tz).utcoffset() != offset:
            return _first_change(tz, low, high)
        low = high
    return None


def _first_change(tz: tzinfo, low: datetime, high: datetime) -> datetime:
    """The instant in (low, high] where `tz`'s offset changes, given that it changes once."""
    offset = low.astimezone(tz).utcoffset()
    while high - low > _MICROSECOND:
        middle = low + (high - low) // 2
        if middle.astimezone(tz).utcoffset() == offset:
            low = middle
        else:
            high = middle
    return high


def _without_hour_gaps(readings: Iterator[datetime]) -> Iterator[datetime]:
    """`readings` of an hourly expression, plus a tick one hour after any reading that the
    next one follows by more than an hour (but less than two: a clock change, not a day the
    expression skips). A change of half an hour leaves such a gap: in Lord Howe, ``0 * * * *``
    reads 01:00+11:00 at 14:00Z, then 02:00+10:30 at 15:30Z; 15:00Z fills it."""
    previous: datetime | None = None
    for reading in readings:
        if previous is not None and _HOUR < reading - previous < _HOURLY_LOOKBACK:
            yield previous + _HOUR
        yield reading
        previous = reading


def _within_datetime_range(ticks: Iterator[datetime]) -> Iterator[datetime]:
    """`ticks`, ending quietly where datetime's range (years 1 to 9999, local or UTC) ends."""
    try:
        yield from ticks
    except OverflowError:
        return


@dataclass(frozen=True, slots=True)
class IntervalCadence:
    """Ticks every `period`, at the Unix epoch plus whole multiples of it (UTC, DST-proof)."""

    period: timedelta
    zone: str = "UTC"
    expression: str = field(init=False)
    _period_us: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.period, timedelta) or self.period < MIN_INTERVAL:
            raise InvalidSchedule(f"invalid interval {self.period!r}: it must be at least 1s")
        zone_info(self.zone)
        period_us = self.period // _MICROSECOND
        object.__setattr__(self, "_period_us", period_us)
        object.__setattr__(self, "expression", f"every {_format_period(period_us)}")

    def next_after(self, moment: datetime) -> datetime:
        try:
            return self._tick(self._index_at(check_aware("moment", moment)) + 1)
        except OverflowError:
            raise InvalidSchedule(
                f"interval {self.expression!r} has no tick after {moment.isoformat()} "
                "before the year 10000"
            ) from None

    def ticks_between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        first, last = self._indices(after, until)
        _check_count("limit", limit)
        return [self._tick(k) for k in range(first, min(last, first + limit - 1) + 1)]

    def latest(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        first, last = self._indices(after, until)
        _check_count("limit", limit)
        return [self._tick(k) for k in range(max(first, last - limit + 1), last + 1)]

    def count_between(self, after: datetime, until: datetime, cap: int) -> int:
        first, last = self._indices(after, until)
        _check_count("cap", cap)
        return min(max(0, last - first + 1), cap)

    def _indices(self, after: datetime, until: datetime) -> tuple[int, int]:
        """Indices k of the first and last tick in (after, until]; first > last when none."""
        _span(after, until)
        return self._index_at(after) + 1, self._index_at(until)

    def _index_at(self, moment: datetime) -> int:
        """The index of the last tick at or before `moment` (integer microseconds: no drift)."""
        return ((moment - _EPOCH) // _MICROSECOND) // self._period_us

    def _tick(self, index: int) -> datetime:
        return _EPOCH + timedelta(microseconds=index * self._period_us)


def preview(cadence: Cadence, start: datetime, count: int) -> list[datetime]:
    """The next `count` ticks after `start`, on the schedule's wall clock, for display."""
    _check_count("count", count)
    zone = zone_info(cadence.zone)
    ticks: list[datetime] = []
    moment = check_aware("start", start)
    for _ in range(count):
        moment = cadence.next_after(moment)
        ticks.append(moment.astimezone(zone))
    return ticks


def ticks_within_the_minute(cadence: Cadence) -> bool:
    """Whether a cron expression ticks at seconds past the minute, or more than once in one
    (six fields whose seconds are not just 0). An interval's ticks are its period apart."""
    fields = cadence.expression.split()
    if isinstance(cadence, IntervalCadence) or len(fields) != 6:
        return False
    return CronSim(f"{fields[0]} * * * * *", _EPOCH).seconds != {0}


def shortest_gap(cadence: Cadence, start: datetime) -> timedelta | None:
    """The shortest time between two consecutive ticks: an interval's period; for cron, the
    least over its ticks after `start` within `GAP_LOOKAHEAD`, at most `GAP_TICKS` of them (a
    year of a daily expression, with its DST changes; 16 hours of a minutely one). None when
    fewer than two ticks fall in that span."""
    if isinstance(cadence, IntervalCadence):
        return cadence.period
    ticks = cadence.ticks_between(start, _until(start, GAP_LOOKAHEAD), GAP_TICKS)
    return min((b - a for a, b in itertools.pairwise(ticks)), default=None)


def _until(start: datetime, span: timedelta) -> datetime:
    try:
        return start + span
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def jitter_offset(schedule_name: str, tick: datetime, window: timedelta) -> timedelta:
    """A pseudo-random offset in [0, window) that every scheduler process computes alike.

    It is drawn from a hash of the schedule name and the tick's UTC instant, so no coordination
    is needed, and it differs from tick to tick so one schedule does not always run late.
    """
    utc_tick = check_aware("tick", tick).astimezone(UTC)
    if window < timedelta(0):
        seconds = f"{window.total_seconds():.6f}".rstrip("0").rstrip(".")
        raise InvalidSchedule(f"jitter window must not be negative, got {seconds}s")
    window_us = window // _MICROSECOND
    if window_us == 0:
        return timedelta(0)
    seed = f"{schedule_name}\x00{utc_tick.isoformat()}".encode()
    draw = int.from_bytes(hashlib.blake2b(seed, digest_size=8).digest(), "big")
    return timedelta(microseconds=draw % window_us)


def zone_info(name: str) -> tzinfo:
    """The time zone named `name` (an IANA key such as "Europe/Paris", or "UTC")."""
    if name == "UTC":
        # The stdlib UTC is what cronsim recognises as "no DST handling needed".
        return UTC
    if name == "localtime":
        # Present on many hosts, but it is whatever zone the host is set to: two schedulers
        # on different hosts would disagree about the same schedule.
        raise InvalidSchedule(
            "time zone 'localtime' depends on the host: name an IANA zone such as 'Europe/Paris'"
        )
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        # ValueError: not a relative key ("", "../x"); OSError: a folder such as "America".
        raise InvalidSchedule(f"unknown time zone {name!r}{_zone_hint(name)}") from None


def _zone_hint(name: object) -> str:
    if not isinstance(name, str):
        return ""
    known = zoneinfo.available_timezones()
    by_case = {key.lower(): key for key in known}
    match = by_case.get(name.strip().lower()) or next(
        iter(difflib.get_close_matches(name, known, n=1)), None
    )
    return f": did you mean {match!r}?" if match else ""


def _normalise_cron(expression: str) -> str:
    fields = " ".join(expression.split())
    if fields.startswith("@"):
        if fields.lower() not in _MACROS:
            raise InvalidSchedule(
                f"invalid cron expression {expression!r}: known macros are {', '.join(_MACROS)}"
            )
        fields = _MACROS[fields.lower()]
    try:
        CronSim(fields, _EPOCH)
    except CronSimError as exc:
        raise InvalidSchedule(f"invalid cron expression {expression!r}: {exc}") from None
    return fields


def _parse_interval(expression: str) -> timedelta:
    match = _EVERY.fullmatch(expression.strip())
    text = "".join((match["duration"] or "").split()) if match else ""
    if not text:
        raise InvalidSchedule(f"invalid interval {expression!r}: {_INTERVAL_FORMS}")
    if text.startswith("-"):
        raise InvalidSchedule(f"invalid interval {expression!r}: it must be positive")
    try:
        period = parse_duration(text)
    except InvalidDuration as exc:
        reason = str(exc).partition(": ")[2]
        # The generic hint lists 250ms, which an interval refuses: give the interval forms.
        hint = _INTERVAL_FORMS if reason.startswith("use forms like") else reason
        raise InvalidSchedule(f"invalid interval {expression!r}: {hint}") from None
    if period <= timedelta(0):
        raise InvalidSchedule(f"invalid interval {expression!r}: it must be positive")
    if period < MIN_INTERVAL:
        raise InvalidSchedule(f"invalid interval {expression!r}: it must be at least 1s")
    return period


def _format_period(period_us: int) -> str:
    """Compact text that parse_duration reads back exactly: 1d2h3m4.5s."""
    parts: list[str] = []
    rest = period_us
    for unit, size in _UNITS_US:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    if rest:
        seconds, fraction = divmod(rest, 1_000_000)
        decimals = f".{fraction:06d}".rstrip("0") if fraction else ""
        parts.append(f"{seconds}{decimals}s")
    return "".join(parts)


def _window_start(start: datetime, end: datetime, window: timedelta) -> datetime:
    """The later of `start` and `end - window` (`start` where the subtraction leaves datetime's
    range)."""
    try:
        return max(start, end - window)
    except OverflowError:
        return start


def _span(after: datetime, until: datetime) -> datetime:
    check_aware("after", after)
    return check_aware("until", until).astimezone(UTC)


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
