"""parse_duration and format_duration: the durations people write in settings and on the CLI."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronoq.core.durations import format_duration, parse_duration
from chronoq.errors import InvalidDuration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("7d", 7 * 86400),
        ("1w", 604800),
        ("250ms", 0.25),
        ("1h30m", 5400),
        ("1d2h3m4s5ms", 86400 + 7200 + 180 + 4.005),
        ("1.5h", 5400),
        ("0.5s", 0.5),
        ("90", 90),
        ("2.25", 2.25),
        ("0", 0),
        ("0s", 0),
        ("  10S  ", 10),
        ("3H", 10800),
        ("1m1m", 120),
        ("36500d", 36500 * 86400),  # exactly the limit
    ],
)
def test_valid_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "abc",
        "5x",
        "s",
        "h1",
        "1m30",
        "1 h",
        "1h 30m",
        "1..5s",
        "1.s",
        ".5s",
        "5mm",
        "1,5s",
    ],
)
def test_malformed_durations(text: str) -> None:
    with pytest.raises(InvalidDuration, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["-5", "-0.001", "-5s", "-1h30m"])
def test_negative_durations(text: str) -> None:
    with pytest.raises(InvalidDuration):
        parse_duration(text)


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan"])
def test_not_a_number(text: str) -> None:
    with pytest.raises(InvalidDuration, match="not a number"):
        parse_duration(text)


@pytest.mark.parametrize(
    "text", ["36501d", "5300w", "1e400", "inf", "-inf", "9" * 400, "9" * 400 + "s", "1e12"]
)
def test_huge_durations(text: str) -> None:
    with pytest.raises(InvalidDuration):
        parse_duration(text)


def test_the_error_names_the_input_and_the_accepted_forms() -> None:
    with pytest.raises(InvalidDuration) as caught:
        parse_duration("5 minutes")
    assert "'5 minutes'" in str(caught.value)
    assert "1h30m" in str(caught.value)


@given(
    st.lists(
        st.tuples(st.integers(0, 999), st.sampled_from(["ms", "s", "m", "h", "d"])),
        min_size=1,
        max_size=5,
    )
)
def test_parts_add_up(parts: list[tuple[int, str]]) -> None:
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    text = "".join(f"{n}{u}" for n, u in parts)
    expected = sum(n * unit[u] for n, u in parts)
    assert parse_duration(text).total_seconds() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0ms"),
        (0.45, "450ms"),
        (12.34, "12.3s"),
        (245, "4m05s"),
        (7800, "2h10m"),
        (3 * 86400 + 4 * 3600 + 59, "3d04h"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(timedelta(seconds=seconds)) == text
