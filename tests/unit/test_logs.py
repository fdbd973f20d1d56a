"""Log output: JSON lines with every extra field and the running job's, and the text default."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from chronoq.observability.logs import (
    TEXT_FORMAT,
    JobLogAdapter,
    JsonFormatter,
    configure_logging,
    current_job,
)
from chronoq.worker.context import JobContext
from tests.unit.test_metrics import job

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger of its own writing JSON lines to a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("chronoq.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, buffer
    logger.removeHandler(handler)
    logger.propagate = True


def entries(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_line_is_one_json_object_with_the_base_keys_and_every_extra(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, buffer = lines
    at = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)
    logger.warning(
        "job %d failed",
        42,
        extra={
            "job_id": 42,
            "task": "send",
            "queue": "mail",
            "attempt": 2,
            "at": at,
            "ids": {3, 1},
        },
    )
    [entry] = entries(buffer)
    assert ISO_UTC.match(entry.pop("ts"))
    assert entry == {
        "level": "WARNING",
        "logger": "chronoq.test.logs",
        "message": "job 42 failed",
        "process": entry["process"],
        "job_id": 42,
        "task": "send",
        "queue": "mail",
        "attempt": 2,
        "at": "2030-01-31T09:00:00+00:00",
        "ids": [1, 3],
    }
    assert isinstance(entry["process"], int)


def test_exceptions_become_an_exc_string_and_base_keys_are_never_overwritten(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, buffer = lines
    try:
        raise ValueError("upstream said no")
    except ValueError:
        logger.exception("it broke", extra={"level": "mine", "thing": object()})
    [entry] = entries(buffer)
    assert entry["level"] == "ERROR" and entry["level_"] == "mine"
    assert entry["exc"].startswith("Traceback") and "ValueError: upstream said no" in entry["exc"]
    assert entry["thing"].startswith("<object object")


def test_a_record_logged_while_a_job_runs_carries_its_fields(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, buffer = lines
    token = current_job.set(job("mail", "send"))
    try:
        logger.info("from the handler")
        logger.info("about another job", extra={"job_id": 7})
    finally:
        current_job.reset(token)
    logger.info("after the job")
    inside, other, after = entries(buffer)
    assert (inside["job_id"], inside["task"], inside["queue"], inside["attempt"]) == (
        1,
        "send",
        "mail",
        1,
    )
    assert other["job_id"] == 7 and "task" not in other
    assert "job_id" not in after


def test_the_context_logger_merges_the_callers_extra(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, buffer = lines
    ctx = JobContext(job("mail", "send"), "w", store=None)  # type: ignore[arg-type]
    assert isinstance(ctx.logger, JobLogAdapter)
    adapter = JobLogAdapter(logger, dict(ctx.logger.extra or {}))
    adapter.info("sent", extra={"to": "a@example.com", "job_id": 999})
    [entry] = entries(buffer)
    assert entry["to"] == "a@example.com"
    assert (entry["job_id"], entry["task"], entry["queue"], entry["attempt"]) == (
        1,
        "send",
        "mail",
        1,
    )


@contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger without handlers, as in a fresh process, then as it was. Entered in the
    test's body: pytest adds its capturing handlers for the test's call, after fixtures run."""
    root = logging.getLogger()
    saved, root.handlers = root.handlers, []
    level, root_level = logging.getLogger("chronoq").level, root.level
    try:
        yield root
    finally:
        root.handlers = saved
        root.setLevel(root_level)
        logging.getLogger("chronoq").setLevel(level)


def test_configure_logging_json() -> None:
    stream = io.StringIO()
    with bare_root():
        configure_logging("warning", stream, "json")
        logging.getLogger("chronoq.worker").info("hidden below the level")
        logging.getLogger("chronoq.worker").warning("shown", extra={"action": "test"})
    [entry] = entries(stream)
    assert (entry["logger"], entry["message"], entry["action"]) == (
        "chronoq.worker",
        "shown",
        "test",
    )


def test_configure_logging_text_is_the_classic_line() -> None:
    stream = io.StringIO()
    with bare_root() as root:
        configure_logging("info", stream)
        logging.getLogger("chronoq.worker").info("hello", extra={"action": "test"})
        [handler] = root.handlers
    assert handler.formatter is not None and handler.formatter._fmt == TEXT_FORMAT
    assert re.search(r" INFO    chronoq\.worker \[\d+\]: hello$", stream.getvalue().strip())


def test_configure_logging_leaves_a_host_programs_handlers_alone() -> None:
    mine = logging.NullHandler()
    with bare_root() as root:
        root.addHandler(mine)
        configure_logging("debug", io.StringIO(), "json")
        assert root.handlers == [mine]
        assert logging.getLogger("chronoq").level == logging.DEBUG


def test_an_unknown_format_is_refused() -> None:
    with bare_root(), pytest.raises(ValueError, match="text, json"):
        configure_logging("info", io.StringIO(), "xml")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_any_logger_in_a_job_is_written_at_the_level_and_libraries_outside_one_are_not(
    fmt: str,
) -> None:
    stream = io.StringIO()
    with bare_root():
        configure_logging("debug", stream, fmt)
        token = current_job.set(job("mail", "send"))
        try:
            logging.getLogger("myapp").debug("from the handler")
        finally:
            current_job.reset(token)
        logging.getLogger("somelibrary").debug("library chatter")
        logging.getLogger("somelibrary").warning("library trouble")
        logging.getLogger("chronoq.worker").debug("chronoq detail")
    written = stream.getvalue()
    assert "from the handler" in written and "chronoq detail" in written
    assert "library chatter" not in written and "library trouble" in written


def test_a_text_line_a_handler_writes_ends_with_its_jobs_fields() -> None:
    stream = io.StringIO()
    with bare_root():
        configure_logging("info", stream, "text")
        token = current_job.set(job("mail", "send"))
        try:
            logging.getLogger("myapp").info("from the handler")
            logging.getLogger("chronoq.worker").info("job 1 send done", extra={"job_id": 1})
        finally:
            current_job.reset(token)
        ctx = JobContext(job("mail", "send"), "w", store=None)  # type: ignore[arg-type]
        ctx.logger.info("through the context")
    handler_line, own_line, context_line = stream.getvalue().splitlines()
    fields = "job_id=1 task=send queue=mail attempt=1"
    assert handler_line.endswith(f"myapp [{os.getpid()}]: from the handler  {fields}")
    assert own_line.endswith("job 1 send done")
    assert context_line.endswith(f"through the context  {fields}")
