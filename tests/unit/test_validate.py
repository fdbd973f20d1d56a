"""validate.py: what callers hand to enqueue is checked before anything is stored."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest

from chronoq.core.validate import (
    MAX_KEY_LENGTH,
    MAX_NAME_LENGTH,
    check_aware,
    check_int,
    check_key,
    check_name,
    check_positive_seconds,
    delay_seconds,
    encode_payload,
)
from chronoq.errors import (
    ConfigError,
    EnqueueError,
    InvalidDuration,
    InvalidPayload,
    NaiveDatetime,
    PayloadTooLarge,
)

# -- datetimes ------------------------------------------------------------------------------


class _NoOffset(tzinfo):
    """A time zone that does not know its offset: as good as none."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def test_naive_datetime_is_rejected_with_the_fix() -> None:
    with pytest.raises(NaiveDatetime) as caught:
        check_aware("at", datetime(2030, 1, 1, 9, 0))
    assert "at=2030-01-01T09:00:00" in str(caught.value)
    assert "datetime.now(UTC)" in str(caught.value)
    assert isinstance(caught.value, EnqueueError)


def test_datetime_whose_zone_has_no_offset_is_naive() -> None:
    with pytest.raises(NaiveDatetime):
        check_aware("at", datetime(2030, 1, 1, tzinfo=_NoOffset()))


@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=-5, minutes=-30))])
def test_aware_datetimes_pass_unchanged(zone: tzinfo) -> None:
    moment = datetime(2030, 1, 1, 9, 0, tzinfo=zone)
    assert check_aware("at", moment) is moment


@pytest.mark.parametrize("value", ["2030-01-01T00:00:00Z", 1_900_000_000, None])
def test_non_datetimes_are_rejected(value: object) -> None:
    with pytest.raises(ConfigError, match="at must be a datetime"):
        check_aware("at", value)


# -- payloads -------------------------------------------------------------------------------


def test_payload_is_compact_json_keeping_unicode() -> None:
    text = encode_payload("t", {"to": "zoë@example.com", "n": [1, 2.5, None, True]}, 1024)
    assert text == '{"to":"zoë@example.com","n":[1,2.5,null,true]}'


def test_missing_payload_is_an_empty_object() -> None:
    assert encode_payload("t", None, 10) == "{}"


@pytest.mark.parametrize("payload", [[1, 2], "text", 3, ("a",), {"a"}])
def test_payload_must_be_a_dict(payload: object) -> None:
    with pytest.raises(InvalidPayload, match="must be a JSON object"):
        encode_payload("send", payload, 1024)


@pytest.mark.parametrize(
    "payload",
    [
        {"when": datetime(2030, 1, 1, tzinfo=UTC)},
        {"data": b"bytes"},
        {"obj": object()},
        {"set": {1, 2}},
        {("tuple", "key"): 1},
    ],
)
def test_payload_must_be_json(payload: dict[object, object]) -> None:
    with pytest.raises(InvalidPayload, match="not valid JSON"):
        encode_payload("send", payload, 1024)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_payload_must_not_hold_nan_or_infinity(number: float) -> None:
    with pytest.raises(InvalidPayload, match="not valid JSON"):
        encode_payload("send", {"x": [1, {"y": number}]}, 1024)


@pytest.mark.parametrize(
    "payload", [{"s": "a\x00b"}, {"k\x00": 1}, {"deep": [{"s": "\x00"}]}, {"s": "\\\x00"}]
)
def test_payload_must_not_hold_nul(payload: dict[str, object]) -> None:
    with pytest.raises(InvalidPayload, match="NUL"):
        encode_payload("send", payload, 1024)


@pytest.mark.parametrize("text", ["\\u0000", "C:\\u0000\\x", "\\\\u0000", "u0000"])
def test_text_that_only_spells_an_escaped_nul_is_fine(text: str) -> None:
    """A backslash followed by "u0000" is ordinary text (Windows paths, docs about JSON)."""
    encoded = encode_payload("send", {"s": text}, 1024)
    assert json.loads(encoded) == {"s": text}


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb"])
def test_payload_must_be_encodable_as_utf8(text: str) -> None:
    with pytest.raises(InvalidPayload, match="UTF-8"):
        encode_payload("send", {"s": text}, 1024)


def test_payload_size_is_counted_in_utf8_bytes() -> None:
    payload = {"s": "é" * 10}  # 10 characters, 20 bytes, 28 bytes encoded with the braces
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())
    assert size == 28
    assert encode_payload("send", payload, size)
    with pytest.raises(PayloadTooLarge) as caught:
        encode_payload("send", payload, size - 1)
    assert "28 bytes" in str(caught.value)
    assert "limit is 27 bytes" in str(caught.value)
    assert isinstance(caught.value, EnqueueError)


# -- names and keys -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["emails", "a", "q'uote\"s", "t; DROP TABLE x; --", "名前", "x" * MAX_NAME_LENGTH]
)
def test_valid_names(name: str) -> None:
    assert check_name("queue", name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "non-empty"),
        ("   ", "non-empty"),
        (None, "non-empty"),
        (42, "non-empty"),
        ("x" * (MAX_NAME_LENGTH + 1), "201 characters"),
        ("a\nb", "control characters"),
        ("a\x00b", "control characters"),
        ("tab\there", "control characters"),
        ("del\x7f", "control characters"),
    ],
)
def test_invalid_names(name: object, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        check_name("queue", name)
    assert str(caught.value).startswith("queue name")


def test_keys() -> None:
    assert check_key(None) is None
    assert check_key("welcome-42 'é'") == "welcome-42 'é'"
    assert check_key("k" * MAX_KEY_LENGTH) == "k" * MAX_KEY_LENGTH


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("", "non-empty"),
        (42, "non-empty"),
        ("k" * (MAX_KEY_LENGTH + 1), "1001 characters"),
        ("a\x00b", "NUL"),
    ],
)
def test_invalid_keys(key: object, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        check_key(key)


# -- numbers and delays ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [
        (None, 0.0),
        (0, 0.0),
        (5, 5.0),
        (2.5, 2.5),
        (timedelta(minutes=2), 120.0),
        ("10s", 10.0),
        ("1h30m", 5400.0),
    ],
)
def test_delays(delay: object, seconds: float) -> None:
    assert delay_seconds(delay) == seconds


@pytest.mark.parametrize(
    "delay",
    [-1, -0.5, timedelta(seconds=-1), math.nan, math.inf, "-5s", "soon", True, [1], 1e10],
)
def test_invalid_delays(delay: object) -> None:
    with pytest.raises(InvalidDuration):
        delay_seconds(delay)


def test_check_int() -> None:
    assert check_int("priority", 5, 0, 10) == 5
    for value in (True, 1.0, "1", None):
        with pytest.raises(ConfigError, match="must be an integer"):
            check_int("priority", value, 0, 10)
    for value in (-1, 11):
        with pytest.raises(ConfigError, match="between 0 and 10"):
            check_int("priority", value, 0, 10)


def test_check_positive_seconds() -> None:
    assert check_positive_seconds("lease", 30) == 30.0
    assert check_positive_seconds("lease", timedelta(minutes=1)) == 60.0
    for value in (0, -1, math.nan, True, "30", None, timedelta(0)):
        with pytest.raises(ConfigError, match="lease must be a positive number"):
            check_positive_seconds("lease", value)
    for value in (math.inf, 1e12):
        with pytest.raises(ConfigError, match="out of range"):
            check_positive_seconds("lease", value)
