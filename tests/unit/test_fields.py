"""Request values as the API and the dashboard both read them: each refusal names the value."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from chronoq.core.jobs import MAX_ID, JobStatus
from chronoq.http import fields
from chronoq.http.fields import FieldError


def refusal(call: Callable[..., object], *args: object) -> FieldError:
    with pytest.raises(FieldError) as caught:
        call(*args)
    return caught.value


def test_job_ids_are_positive_ascii_digits_up_to_the_largest_stored() -> None:
    assert fields.job_id("job id", " 42 ") == 42
    assert fields.job_id("job id", str(MAX_ID)) == MAX_ID
    assert fields.job_id("job id", "0" * 30 + "7") == 7
    for text in ("0", "-1", "1.5", "abc", "", "\uff11", str(MAX_ID + 1), "9" * 5000):
        error = refusal(fields.job_id, "cursor", text)
        assert str(error).startswith("cursor must be a positive whole number, got ")
        assert (error.field, error.kind) == ("cursor", "ValidationError")
    assert len(str(refusal(fields.job_id, "job id", "9" * 5000))) < 120


def test_selected_ids_come_once_each_in_order() -> None:
    assert fields.job_ids("job id", ["3", "1", "3"]) == [1, 3]
    assert "got 'two'" in str(refusal(fields.job_ids, "job id", ["1", "two"]))


def test_names_and_keys() -> None:
    assert fields.name("queue", "emails") == "emails"
    assert fields.name_filter("queue", None) is None
    assert fields.key_filter(None) is None
    assert fields.key_filter('"><b>key</b>') == '"><b>key</b>'
    assert str(refusal(fields.name, "queue", "")).startswith("queue name must be a non-empty")
    assert "control characters" in str(refusal(fields.name_filter, "task", "a\x01"))
    nul = refusal(fields.name_filter, "queue", "a\x00b")
    assert (str(nul), nul.field) == ("queue must not contain a NUL character", "queue")
    assert str(refusal(fields.key_filter, "k\x00")) == "key must not contain a NUL character"
    assert "the limit is 1000" in str(refusal(fields.key_filter, "k" * 1001))


def test_durations_from_text_or_seconds() -> None:
    assert fields.duration("older than", "7d") == timedelta(days=7)
    assert fields.duration("older_than", 90.0) == timedelta(seconds=90)
    assert "invalid duration 'a week'" in str(refusal(fields.duration, "older than", "a week"))
    assert "must not be negative" in str(refusal(fields.duration, "older than", "-1d"))
    for seconds in (-1.0, 1e300, math.nan, math.inf):
        error = refusal(fields.duration, "older_than", seconds)
        assert str(error) == "older_than must be between 0 and 100 years"
        assert error.kind == "InvalidDuration"


def test_form_instants_are_read_as_utc_without_an_offset() -> None:
    assert fields.form_instant("created after", " ") is None
    assert fields.form_instant("created after", "2026-01-31") == datetime(2026, 1, 31, tzinfo=UTC)
    paris = fields.form_instant("created after", "2026-01-31T10:30+01:00")
    assert paris == datetime(2026, 1, 31, 9, 30, tzinfo=UTC) and paris.tzinfo is UTC
    for text in ("yesterday", "2026-13-01", "9999-12-31T23:59:59-23:00"):
        assert "created after must be a date such as" in str(
            refusal(fields.form_instant, "created after", text)
        )


def test_instants_from_programs_need_their_offset() -> None:
    aware = datetime(2027, 1, 1, 9, tzinfo=timezone(timedelta(hours=2)))
    assert fields.aware_instant("created_after", aware) is aware
    assert fields.aware_instant("created_after", None) is None
    error = refusal(fields.aware_instant, "created_after", datetime(2027, 1, 1))
    assert (error.field, error.kind) == ("created_after", "NaiveDatetime")
    assert "has no time zone: give an offset" in str(error)


def test_statuses_by_name() -> None:
    assert fields.status("status", "dead") is JobStatus.DEAD
    assert fields.status("status", "") is None
    assert str(refusal(fields.status, "status", "lost")).startswith("status must be one of pending")
