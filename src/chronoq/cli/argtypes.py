"""The value types of the `chronoq` command's options: each turns an argument's text into its
value or raises `argparse.ArgumentTypeError` with a message that names what is wrong, so a bad
value is a usage error before any database is opened (argparse prefixes the message with the
option).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from chronoq.core.durations import parse_duration
from chronoq.core.jobs import MAX_ID, JobStatus
from chronoq.errors import ChronoqError

MAX_COUNT = 2**63 - 1  # the largest integer both databases store
MAX_PREVIEW = 1000
DEMO_JOBS = (10, 5000)  # the demo's --jobs, from enough for every kind of job to a few seconds


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT}, got {value}")
    return value


def demo_job_count(text: str) -> int:
    """The demo's one bound, for 0, 3 and 9000 alike: fewer jobs than DEMO_JOBS' low end would
    leave out some kind of job the demo shows."""
    value = whole_number(text)
    low, high = DEMO_JOBS
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            f"must be between {low} and {high} to show every kind of job, got {value}"
        )
    return value


def preview_count(text: str) -> int:
    value = positive_int(text)
    if value > MAX_PREVIEW:
        raise argparse.ArgumentTypeError(f"preview at most {MAX_PREVIEW} ticks, got {value}")
    return value


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"job id {text!r} is not a number") from None
    if not 1 <= value <= MAX_ID:
        raise argparse.ArgumentTypeError(f"job id {value} is out of range")
    return value


def duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ChronoqError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def instant(text: str) -> datetime:
    """An ISO 8601 date-time that carries its UTC offset: a naive one would be ambiguous."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date-time such as 2030-01-31T09:00:00+01:00"
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        example = moment.replace(tzinfo=UTC).isoformat()
        raise argparse.ArgumentTypeError(
            f"{text!r} has no UTC offset, so the moment it names is ambiguous; "
            f"add one, e.g. {example}"
        )
    return moment


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:  # malformed, or an integer with too many digits to convert
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("not valid JSON: it is nested too deeply") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"must be a JSON object of the handler's arguments, got a JSON {_json_kind(value)}"
        )
    return value


def _json_kind(value: object) -> str:
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def statuses(text: str) -> list[JobStatus]:
    """One status or several separated by commas: `pending,running`."""
    wanted = []
    for name in (part.strip().lower() for part in text.split(",")):
        try:
            wanted.append(JobStatus(name))
        except ValueError:
            known = ", ".join(status.value for status in JobStatus)
            raise argparse.ArgumentTypeError(f"unknown status {name!r}; use {known}") from None
    return wanted


def name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty name; write a,b,c")
    return names


def metrics_port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value
