"""The loop a worker runs on: uvloop when installed and not declined, asyncio's otherwise."""

from __future__ import annotations

import asyncio
import sys

import pytest

import chronoq
from chronoq.errors import ConfigError
from chronoq.worker.loops import loop_factory
from chronoq.worker.worker import Worker, WorkerOptions


def _loop_module_running(dsn: str, choice: str) -> str:
    """The module of the loop class a burst worker's handler ran on."""
    seen: list[str] = []
    with chronoq.App(dsn) as app:

        @app.task()
        async def which_loop() -> None:
            seen.append(type(asyncio.get_running_loop()).__module__)

        job = app.enqueue("which_loop")
        Worker(app, WorkerOptions(burst=True, event_loop=choice)).run(install_signal_handlers=False)
        done = app.get_job(job.id)  # type: ignore[union-attr]
        assert done is not None
        assert done.status == "done"
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize(("choice", "module"), [("auto", "uvloop"), ("uvloop", "uvloop")])
def test_a_worker_runs_on_uvloop_when_it_is_installed(
    sqlite_dsn: str, choice: str, module: str
) -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed (chronoq[uvloop])")
    assert _loop_module_running(sqlite_dsn, choice).split(".")[0] == module


def test_a_worker_told_asyncio_runs_on_asyncios_loop(sqlite_dsn: str) -> None:
    assert _loop_module_running(sqlite_dsn, "asyncio").split(".")[0] == "asyncio"


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import uvloop` sees uninstalled
    assert loop_factory("auto") is None
    assert loop_factory("asyncio") is None
    with pytest.raises(ConfigError, match=r"needs the uvloop package.*chronoq\[uvloop\]"):
        loop_factory("uvloop")


def test_an_unknown_event_loop_is_refused_by_name(sqlite_dsn: str) -> None:
    refused = pytest.raises(ConfigError, match="event loop must be one of auto, asyncio, uvloop")
    with chronoq.App(sqlite_dsn) as app, refused:
        Worker(app, WorkerOptions(event_loop="trio"))
