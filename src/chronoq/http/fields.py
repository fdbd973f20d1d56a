"""Values from requests, read and checked in one place for the API and the dashboard: job ids
(and the page cursors, which are ids), queue, task and schedule names, job keys, durations,
instants and job statuses.

Each failure is a `FieldError` whose message names the value at fault and what would do; the
API answers it as a 422 naming the field, the dashboard shows it on the page. The API reads
query and body values through FastAPI first, so it hands these functions typed values (a
`datetime`, seconds as a float); a form sends text, blank for a field left empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from chronoq.core.durations import parse_duration
from chronoq.core.jobs import MAX_ID, JobStatus
from chronoq.core.validate import MAX_DELAY, check_key, check_name
from chronoq.errors import ConfigError, InvalidDuration

SHOWN_LENGTH = 60  # characters of a refused value quoted back in a message
# More digits than the largest id has: refused before int(), which would spend time on a long
# string and refuses one of over 4300 digits with an error of its own.
_ID_DIGITS = len(str(MAX_ID))


class FieldError(ValueError):
    """A request value that cannot be used. `field` names it as the caller wrote it, `kind` is
    the error's type in the API's JSON body, and the message is shown as it is."""

    def __init__(self, field: str, message: str, kind: str = "ValidationError") -> None:
        super().__init__(message)
        self.field, self.kind, self.message = field, kind, message


def optional(text: str) -> str | None:
    """A form field: a submitted form sends every field, so blank means not given."""
    return text if text.strip() else None


def quoted(text: str) -> str:
    """A refused value as a message shows it: in quotes, and shortened when long."""
    return repr(text if len(text) <= SHOWN_LENGTH else text[: SHOWN_LENGTH - 3] + "...")


# -- ids ----------------------------------------------------------------------------------


def job_id(field: str, text: str) -> int:
    """A job id written in ASCII digits; a page cursor is one too (the last id shown)."""
    cleaned = text.strip()
    if (
        not cleaned.isascii()
        or not cleaned.isdigit()
        or len(cleaned.lstrip("0")) > _ID_DIGITS
        or not 0 < int(cleaned) <= MAX_ID
    ):
        raise FieldError(field, f"{field} must be a positive whole number, got {quoted(text)}")
    return int(cleaned)


def job_ids(field: str, values: Iterable[str]) -> list[int]:
    """The ids of the jobs a form selected, each once, in ascending order."""
    return sorted({job_id(field, value) for value in values})


# -- names and keys -----------------------------------------------------------------------


def name(kind: str, value: str) -> str:
    """The name of a queue, task or schedule that must be given."""
    try:
        return check_name(kind, value)
    except ConfigError as exc:
        raise FieldError(kind, str(exc)) from None


def name_filter(kind: str, value: str | None) -> str | None:
    """A queue or task name to search by; None matches any."""
    if value is None:
        return None
    _refuse_nul(kind, value)
    return name(kind, value)


def key_filter(value: str | None) -> str | None:
    """A job key to search by; None matches any."""
    if value is None:
        return None
    _refuse_nul("key", value)
    try:
        return check_key(value)
    except ConfigError as exc:
        raise FieldError("key", str(exc)) from None


def _refuse_nul(field: str, value: str) -> None:
    # Said before any other check: no store can hold a NUL, so none could match.
    if "\x00" in value:
        raise FieldError(field, f"{field} must not contain a NUL character")


# -- durations and instants ---------------------------------------------------------------


def duration(field: str, value: float | str) -> timedelta:
    """A duration from 0 to 100 years: seconds, or text such as "7d" or "1h30m"."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except InvalidDuration as exc:
            raise FieldError(field, str(exc), "InvalidDuration") from None
    if not 0 <= value <= MAX_DELAY.total_seconds():  # NaN is in no range
        raise FieldError(field, f"{field} must be between 0 and 100 years", "InvalidDuration")
    return timedelta(seconds=value)


def form_instant(field: str, text: str) -> datetime | None:
    """A date, or a date and time, typed in a form: without an offset it is read as UTC, since
    a browser's date fields send none. Blank means not given."""
    cleaned = text.strip()
    if not cleaned:
        return None
    try:
        moment = datetime.fromisoformat(cleaned)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise FieldError(
            field,
            f"{field} must be a date such as 2026-01-31 or 2026-01-31T09:30 (UTC unless an "
            f"offset is given), got {quoted(text)}",
        ) from None


def aware_instant(field: str, moment: datetime | None) -> datetime | None:
    """An instant a program sent: it must carry its offset, as no zone can be assumed for it."""
    if moment is not None and moment.utcoffset() is None:
        raise FieldError(field, naive_message(field), "NaiveDatetime")
    return moment


def naive_message(field: str) -> str:
    return f"{field} has no time zone: give an offset, e.g. 2027-01-01T09:00:00Z"


# -- statuses -----------------------------------------------------------------------------


def status(field: str, text: str) -> JobStatus | None:
    """A job status by its name; blank means any."""
    if not text.strip():
        return None
    try:
        return JobStatus(text.strip())
    except ValueError:
        known = ", ".join(str(member) for member in JobStatus)
        raise FieldError(field, f"{field} must be one of {known}, got {quoted(text)}") from None
