"""Durations as people write them: 30s, 5m, 2h, 7d, 1h30m, 250ms, or plain seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from chronoq.errors import InvalidDuration

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_MAX = timedelta(days=365 * 100)


def parse_duration(text: str) -> timedelta:
    """Read a duration such as ``"10s"``, ``"1h30m"`` or ``"90"`` (seconds)."""
    cleaned = text.strip().lower()
    if not cleaned:
        raise InvalidDuration(f"invalid duration {text!r}: it is empty")
    try:
        seconds = float(cleaned)
    except ValueError:
        if cleaned.startswith("-"):
            raise InvalidDuration(f"invalid duration {text!r}: it must not be negative") from None
        seconds = _sum_parts(text, cleaned)
    return _checked(text, seconds)


def _sum_parts(original: str, cleaned: str) -> float:
    position = 0
    total = 0.0
    for match in _PART.finditer(cleaned):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(cleaned) or position == 0:
        raise InvalidDuration(
            f"invalid duration {original!r}: use forms like 30s, 5m, 2h, 7d, 1h30m or 250ms"
        )
    return total


def _checked(original: str, seconds: float) -> timedelta:
    if math.isnan(seconds):
        raise InvalidDuration(f"invalid duration {original!r}: it is not a number")
    if seconds < 0:
        raise InvalidDuration(f"invalid duration {original!r}: it must not be negative")
    if seconds > _MAX.total_seconds():
        raise InvalidDuration(f"invalid duration {original!r}: longer than 100 years")
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """Short human form: 450ms, 12.3s, 4m05s, 2h10m, 3d04h."""
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
