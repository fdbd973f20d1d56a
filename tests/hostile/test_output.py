"""Hostile input to job output, progress and `App.wait`: return values the store cannot hold,
progress out of range, ids no job can have, timeouts that are not durations, bad limits. Each is
refused with an error naming the problem, and nothing stored is harmed."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from chronoq import App, ConfigError, InvalidOutput, JobNotFound, OutputTooLarge, WorkerOptions
from chronoq.core.jobs import JobProgress
from chronoq.core.validate import encode_output
from tests.hostile.inputs import NAMES
from tests.hostile.support import HTML, SQL, Arena

TEXTS = [*NAMES, pytest.param(SQL, id="sql-text"), pytest.param(HTML, id="html-text")]

NO_SUCH_IDS = [0, -1, 2**63 - 1, 2**63, 2**70, -(2**70)]
NOT_IDS = ["7", None, 1.5, True, [1]]


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(object(), "is not JSON", id="object"),
        pytest.param({1j: 1}, "is not JSON", id="complex-key"),
        pytest.param(float("nan"), "is not JSON", id="nan"),
        pytest.param([float("inf")], "is not JSON", id="inf"),
        pytest.param({"a": b"bytes"}, "is not JSON", id="bytes"),
        pytest.param({"a": {1, 2}}, "is not JSON", id="set"),
        pytest.param("a\x00b", "NUL character", id="nul"),
        pytest.param({"\x00": 1}, "NUL character", id="nul-key"),
        pytest.param("\ud800", "lone surrogate", id="lone-surrogate"),
        pytest.param(_nested(300), "nested more than 256 levels", id="too-deep"),
        pytest.param(_nested(100_000), "nested more than 256 levels", id="recursion"),
    ],
)
def test_a_return_value_the_store_cannot_hold_is_refused_by_name(value: Any, message: str) -> None:
    with pytest.raises(InvalidOutput, match=message) as refused:
        encode_output("task", value, 65536)
    assert "'task'" in str(refused.value)


@pytest.mark.parametrize("text", TEXTS)
def test_legal_text_round_trips_as_output(text: str) -> None:
    value = {"text": text, "list": [text], text: 1}
    encoded = encode_output("task", value, 65536)
    assert encoded is not None and json.loads(encoded) == value


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    assert encode_output("task", "é" * 10, 22) == '"' + "é" * 10 + '"'
    with pytest.raises(OutputTooLarge, match="is 23 bytes as JSON; the output limit is 22 bytes"):
        encode_output("task", "é" * 10 + "x", 22)


@pytest.mark.parametrize(
    "fraction", [-0.0001, 1.0001, math.nan, math.inf, -math.inf, True, False, "0.5", None, [0.5]]
)
def test_progress_out_of_range_is_refused(fraction: Any) -> None:
    with pytest.raises(ValueError, match="progress must be a number from 0 to 1"):
        JobProgress.checked(fraction)


@pytest.mark.parametrize(
    ("note", "message"),
    [
        ("n" * 201, "at most 200 characters"),
        ("🎉" * 201, "at most 200 characters"),
        (b"bytes", "must be text"),
        ("a\x00b", "NUL"),
        ("\udc80", "lone surrogates"),
    ],
)
def test_a_bad_progress_note_is_refused(note: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JobProgress.checked(0.5, note)


@pytest.mark.parametrize("note", [*NAMES, pytest.param("", id="empty")])
def test_legal_notes_are_kept_as_given(note: str) -> None:
    assert JobProgress.checked(0.5, note).note == note


@pytest.mark.parametrize("job_id", NO_SUCH_IDS)
def test_waiting_for_an_id_no_job_has_is_job_not_found(arena: Arena, job_id: Any) -> None:
    with pytest.raises(JobNotFound):
        arena.app.wait(job_id, timeout=0)
    arena.assert_unharmed()


@pytest.mark.parametrize("job_id", NOT_IDS)
def test_waiting_for_what_is_not_a_job_id_is_refused(arena: Arena, job_id: Any) -> None:
    with pytest.raises(ValueError, match="a job id is a whole number"):
        arena.app.wait(job_id, timeout=0)
    arena.assert_unharmed()


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan, math.inf, "5s", True, [1]])
def test_a_wait_timeout_that_is_not_seconds_is_refused(arena: Arena, timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be None or a number of seconds"):
        arena.app.wait(arena.dead_id, timeout=timeout)
    arena.assert_unharmed()


@pytest.mark.parametrize("limit", [0, -1, True, "1", 1.5])
def test_a_bad_worker_output_limit_is_refused(limit: Any) -> None:
    with pytest.raises(ConfigError, match="output_limit must be a positive number of bytes"):
        WorkerOptions(output_limit=limit).validated()


@pytest.mark.parametrize("limit", [0, -1])
def test_a_bad_app_output_limit_is_refused(limit: int) -> None:
    with pytest.raises(ConfigError, match="output_limit"):
        App("sqlite:///:memory:", output_limit=limit)
