"""What a handler logs through its own logger reaches the worker's stderr at `--log-level`,
with its job's fields, in both `--log-format`s; libraries outside a job stay at WARNING."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from tests.integration.cli_support import Spawner, enqueue

LOGGING_APP = """
import logging

import chronoq

app = chronoq.App()
log = logging.getLogger("myapp")


@app.task
def sync_talk() -> None:
    log.info("sync says info")
    log.debug("sync says debug")


@app.task
async def async_talk() -> None:
    log.info("async says info")
    log.debug("async says debug")
"""

TEXT_LINE = re.compile(
    r" (?P<level>INFO|DEBUG) +myapp \[\d+\]: (?P<message>.+?)"
    r"  job_id=(?P<job_id>\d+) task=(?P<task>\w+) queue=default attempt=1$"
)


def handler_lines(log: str, fmt: str) -> dict[str, tuple[str, int, str]]:
    """message -> (level, job id, task) of each line the handlers logged through "myapp"."""
    found: dict[str, tuple[str, int, str]] = {}
    for line in log.splitlines():
        if fmt == "text" and (match := TEXT_LINE.search(line)):
            found[match["message"]] = (match["level"], int(match["job_id"]), match["task"])
        elif (
            fmt == "json"
            and line.startswith("{")
            and (entry := json.loads(line))["logger"] == ("myapp")
        ):
            assert (entry["queue"], entry["attempt"]) == ("default", 1), entry
            found[entry["message"]] = (entry["level"], entry["job_id"], entry["task"])
    return found


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("level", ["info", "debug"])
def test_a_handlers_own_logger_is_written_with_its_jobs_fields(
    fmt: str, level: str, sqlite_dsn: str, write_app: Callable[[str], str], spawner: Spawner
) -> None:
    spec = write_app(LOGGING_APP)
    sync_id = enqueue(sqlite_dsn, "sync_talk", "--app", spec)
    async_id = enqueue(sqlite_dsn, "async_talk", "--app", spec)

    worker = spawner.start(
        "worker", "--app", spec, "--dsn", sqlite_dsn, "--burst",
        "--log-level", level, "--log-format", fmt,
    )  # fmt: skip

    assert spawner.wait(worker) == 0, spawner.log(worker)
    log = spawner.log(worker)
    expected = {
        "sync says info": ("INFO", sync_id, "sync_talk"),
        "async says info": ("INFO", async_id, "async_talk"),
    }
    if level == "debug":
        expected |= {
            "sync says debug": ("DEBUG", sync_id, "sync_talk"),
            "async says debug": ("DEBUG", async_id, "async_talk"),
        }
    assert handler_lines(log, fmt) == expected, log
    # asyncio logs its selector at DEBUG outside any job: a library, so not written.
    assert "Using selector" not in log
