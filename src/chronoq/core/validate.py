"""Checks on what callers hand to enqueue. Each failure names the field and the fix."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from chronoq.core.durations import parse_duration
from chronoq.errors import (
    ConfigError,
    InvalidDuration,
    InvalidOutput,
    InvalidPayload,
    NaiveDatetime,
    OutputTooLarge,
    PayloadTooLarge,
)

MAX_NAME_LENGTH = 200
MAX_KEY_LENGTH = 1000
# PostgreSQL refuses btree index entries over 2704 bytes, and a rate key shares one with its
# queue name (at most 800 bytes in UTF-8) in the table of key buckets.
MAX_KEY_BYTES = 1800
MAX_DELAY = timedelta(days=365 * 100)
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
# Decoding JSON recurses once per level: a payload much deeper than this could be stored and
# then fail to decode in a worker, whose stack is deeper than the enqueuing caller's.
MAX_PAYLOAD_DEPTH = 256
# json.dumps writes NUL as \u0000. An odd run of backslashes before "u0000" is that escape; an
# even run is escaped backslashes followed by the plain text "u0000", which is fine.
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# One encoder for every payload: json.dumps with options builds a new one per call, which costs
# more than encoding a small payload.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def check_name(kind: str, value: object) -> str:
    """Task and queue names: non-empty text without control characters, at most 200 chars."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{kind} name must be a non-empty string, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigError(f"{kind} name is {len(value)} characters long; the limit is 200")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ConfigError(f"{kind} name {value!r} contains control characters")
    utf8_size(f"{kind} name", value)
    return value


def check_schedule_name(value: object) -> str:
    """A name for a new schedule: a name as `check_name` takes it, that can also be one segment
    of its URL (`/schedules/NAME`). The HTTP server decodes `%2F` before it routes, and clients
    resolve `.` and `..` away, so a name with `/`, or one of those two, could never be reached."""
    name = check_name("schedule", value)
    if "/" in name:
        raise ConfigError(
            f"schedule name {name!r} contains '/'; a schedule name may hold any printable "
            "character except '/' (it is one segment of /schedules/NAME): try "
            f"{name.replace('/', '-')!r}"
        )
    if name in (".", ".."):
        raise ConfigError(f"schedule name {name!r} cannot be a URL path segment; pick another")
    return name


def check_key(key: object, field: str = "key") -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{field} must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise ConfigError(f"{field} is {len(key)} characters long; the limit is {MAX_KEY_LENGTH}")
    if "\x00" in key:
        raise ConfigError(f"{field} contains a NUL character")
    size = utf8_size(field, key)
    if size > MAX_KEY_BYTES:
        raise ConfigError(
            f"{field} is {size} bytes long in UTF-8; the limit is {MAX_KEY_BYTES} bytes"
        )
    return key


def utf8_size(field: str, text: str) -> int:
    """The length of `text` in UTF-8, or ConfigError when it holds a lone surrogate (which a
    command line decodes from bytes that are not UTF-8), since no database can store it."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{field} {text!r} is not valid UTF-8 text: it holds the lone surrogate "
            f"{exc.object[exc.start : exc.end]!r}"
        ) from None


def check_instant(field: str, moment: object) -> datetime:
    """An aware datetime naming an instant the stores can hold: years 1 to 9999 in UTC."""
    try:
        aware = check_aware(field, moment)
        aware.astimezone(UTC)
    except (OverflowError, ValueError, TypeError) as exc:
        # A datetime in a zone far from UTC can leave datetime's range when converted, and a
        # tzinfo of one's own can give an offset that datetime refuses.
        raise ConfigError(
            f"{field}={moment!r} is not an instant between the years 1 and 9999 in UTC: {exc}"
        ) from None
    return aware


def check_aware(field: str, moment: object) -> datetime:
    if not isinstance(moment, datetime):
        raise ConfigError(f"{field} must be a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise NaiveDatetime(
            f"{field}={moment.isoformat()} has no time zone: pass an aware datetime, "
            "e.g. datetime.now(UTC) or dt.replace(tzinfo=ZoneInfo('Europe/Paris'))"
        )
    return moment


def delay_seconds(delay: object) -> float:
    """A delay given as timedelta, seconds, or text like "10s" / "5m", as seconds >= 0."""
    if delay is None:
        return 0.0
    if isinstance(delay, str):
        try:
            return parse_duration(delay).total_seconds()
        except InvalidDuration as exc:
            raise InvalidDuration(f"delay: {exc}") from None
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = delay  # compared before float(): an int may be beyond a float's range
    else:
        raise InvalidDuration(
            f"delay must be a timedelta, seconds or text like '10s', got {delay!r}"
        )
    if not seconds >= 0:
        raise InvalidDuration(f"delay must not be negative, got {delay!r}")
    if seconds > MAX_DELAY.total_seconds():
        raise InvalidDuration(f"delay {delay!r} is longer than 100 years")
    return float(seconds)


def unique_for_seconds(period: object, key: str | None) -> float:
    """How long a job's key stays taken after its enqueue, as seconds > 0: a timedelta,
    seconds, or text like "1h"; it needs the `key` it applies to."""
    if key is None:
        raise ConfigError("unique_for needs a key: give the job's key as well (key=...)")
    if isinstance(period, str):
        try:
            seconds = parse_duration(period).total_seconds()
        except InvalidDuration as exc:
            raise InvalidDuration(f"unique_for: {exc}") from None
    elif isinstance(period, timedelta):
        seconds = period.total_seconds()
    elif isinstance(period, int | float) and not isinstance(period, bool):
        seconds = period
    else:
        raise InvalidDuration(
            f"unique_for must be a timedelta, seconds or text like '1h', got {period!r}"
        )
    if not seconds > 0:
        raise InvalidDuration(f"unique_for must be a positive duration, got {period!r}")
    if seconds > MAX_DELAY.total_seconds():
        raise InvalidDuration(f"unique_for {period!r} is longer than 100 years")
    return float(seconds)


def check_int(field: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{field} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{field} must be between {low} and {high}, got {value}")
    return value


def check_positive_seconds(field: str, value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ConfigError(f"{field} must be a positive number of seconds, got {value!r}")
    if value > MAX_DELAY.total_seconds():
        raise ConfigError(f"{field} is out of range: {value!r}")
    return float(value)


def encode_payload(task: str, payload: object, limit: int) -> str:
    """The payload as compact JSON text, or an error saying why it cannot be stored."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidPayload(
            f"payload for task {task!r} must be a JSON object (a dict of arguments), "
            f"got {type(payload).__name__}"
        )
    if not payload:
        return "{}"
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"payload for task {task!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidPayload(_too_deep_message(task)) from None
    if text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH and _too_deep(payload):
        raise InvalidPayload(_too_deep_message(task))
    if "\\u0000" in text and _ESCAPED_NUL.search(text):
        raise InvalidPayload(
            f"payload for task {task!r} contains a NUL character, which PostgreSQL cannot store"
        )
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidPayload(
            f"payload for task {task!r} cannot be encoded as UTF-8 (a lone surrogate "
            f"{exc.object[exc.start : exc.end]!r}?)"
        ) from None
    if size > limit:
        raise PayloadTooLarge(
            f"payload for task {task!r} is {size} bytes encoded; the limit is {limit} bytes "
            "(raise payload_limit, or store the data elsewhere and pass a reference)"
        )
    return text


def encode_output(task: str, value: object, limit: int) -> str | None:
    """A handler's return value as compact JSON text (None for None), or an `InvalidOutput`
    saying why it cannot be the job's output: not JSON, a NUL or lone surrogate (which
    PostgreSQL refuses), too deep, or (`OutputTooLarge`) over `limit` bytes."""
    if value is None:
        return None
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidOutput(f"the return value of task {task!r} is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidOutput(_output_too_deep(task)) from None
    if text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH and _too_deep(value):
        raise InvalidOutput(_output_too_deep(task))
    if "\\u0000" in text and _ESCAPED_NUL.search(text):
        raise InvalidOutput(
            f"the return value of task {task!r} contains a NUL character, which cannot be stored"
        )
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidOutput(
            f"the return value of task {task!r} cannot be encoded as UTF-8 (a lone surrogate "
            f"{exc.object[exc.start : exc.end]!r}?)"
        ) from None
    if size > limit:
        raise OutputTooLarge(
            f"the return value of task {task!r} is {size} bytes as JSON; the output limit is "
            f"{limit} bytes (return less, or store the data elsewhere and return a reference; "
            "or raise output_limit)"
        )
    return text


def _output_too_deep(task: str) -> str:
    return (
        f"the return value of task {task!r} is nested more than {MAX_PAYLOAD_DEPTH} levels deep "
        "(objects and arrays)"
    )


def _too_deep(payload: object) -> bool:
    """Are objects and arrays nested more than MAX_PAYLOAD_DEPTH deep? (Without recursion.)"""
    stack: list[tuple[object, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[object] = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _too_deep_message(task: str) -> str:
    return (
        f"payload for task {task!r} is nested more than {MAX_PAYLOAD_DEPTH} levels deep "
        "(objects and arrays)"
    )


@dataclass(frozen=True, slots=True)
class PayloadShape:
    """The keyword arguments a handler accepts, worked out once per task: checking a payload is
    then two set comparisons (`Signature.bind` per job costs more than running a no-op job).
    Anything the quick test does not clear goes to `payload_misfit` for the exact reason."""

    task: str
    signature: inspect.Signature
    names: frozenset[str]
    required: frozenset[str]
    accepts_any: bool
    never_fits: bool  # a positional-only parameter without a default: no payload can fill it
    positional_only: frozenset[str]  # bind refuses these names as keywords, even with **kwargs

    @classmethod
    def of(cls, task: str, signature: inspect.Signature) -> PayloadShape:
        params = signature.parameters.values()
        by_keyword = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return cls(
            task=task,
            signature=signature,
            names=frozenset(p.name for p in by_keyword),
            required=frozenset(p.name for p in by_keyword if p.default is p.empty),
            accepts_any=any(p.kind is p.VAR_KEYWORD for p in params),
            never_fits=any(p.kind is p.POSITIONAL_ONLY and p.default is p.empty for p in params),
            positional_only=frozenset(p.name for p in params if p.kind is p.POSITIONAL_ONLY),
        )

    def misfit(self, payload: Any) -> str:
        """Why `payload` cannot be passed to the handler, or "" when it can."""
        if isinstance(payload, dict) and not self.never_fits:
            keys = payload.keys()
            if keys >= self.required and (
                keys <= self.names or (self.accepts_any and keys.isdisjoint(self.positional_only))
            ):
                return ""
        return payload_misfit(self.task, self.signature, payload)

    def check(self, payload: dict[str, Any]) -> None:
        """Raise InvalidPayload naming the gap when the handler cannot take `payload`."""
        problem = self.misfit(payload)
        if problem:
            raise InvalidPayload(problem)


def payload_misfit(task: str, signature: inspect.Signature, payload: dict[str, Any]) -> str:
    """Why `payload` cannot be passed to a handler with `signature`, or "" when it can."""
    if not isinstance(payload, dict):
        # Rows written by other producers may hold any JSON value.
        return f"payload of task {task} must be a JSON object, got {type(payload).__name__}"
    try:
        signature.bind(**payload)
    except TypeError as exc:
        params = signature.parameters.values()
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in params)
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        required = {
            p.name
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        parts = []
        if missing := sorted(required - set(payload)):
            parts.append("missing " + ", ".join(repr(n) for n in missing))
        if not accepts_any and (unexpected := sorted(set(payload) - names)):
            parts.append("unexpected " + ", ".join(repr(n) for n in unexpected))
        shown = ", ".join(str(p).split(":")[0].split("=")[0] for p in params)
        return f"payload does not fit {task}({shown}): {'; '.join(parts) or exc}"
    return ""
