"""Handler middleware: what runs around every handler a worker calls (App.middleware)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import chronoq
from chronoq.testing import drain


class Recorder:
    """A middleware that writes where each call entered and left, and on which thread."""

    def __init__(self, name: str, trail: list[str]) -> None:
        self.name = name
        self.trail = trail
        self.threads: list[str] = []

    def call(self, handler: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        self.trail.append(f"{self.name} in")
        try:
            return handler(*args, **kwargs)
        finally:
            self.trail.append(f"{self.name} out")

    async def call_async(
        self, handler: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
    ) -> Any:
        self.trail.append(f"{self.name} in async")
        try:
            return await handler(*args, **kwargs)
        finally:
            self.trail.append(f"{self.name} out async")


@pytest.fixture
def app(tmp_path: Path) -> Any:
    with chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}") as opened:
        yield opened


def test_sync_and_async_handlers_run_through_every_middleware_outermost_first(
    app: chronoq.App,
) -> None:
    trail: list[str] = []
    outer, inner = Recorder("outer", trail), Recorder("inner", trail)
    app.middleware = (outer, inner)

    @app.task
    def sync_job(word: str) -> str:
        trail.append(f"sync {word}")
        return word

    @app.task
    async def async_job(word: str) -> str:
        trail.append(f"async {word}")
        return word

    sync_job.defer(word="a")
    assert drain(app, concurrency=1).done == 1
    async_job.defer(word="b")
    assert drain(app, concurrency=1).done == 1
    assert trail == [
        "outer in",
        "inner in",
        "sync a",
        "inner out",
        "outer out",
        "outer in async",
        "inner in async",
        "async b",
        "inner out async",
        "outer out async",
    ]
    # A sync handler's middleware runs on the handler's own thread, not the event loop's.
    assert outer.threads and all(name.startswith("chronoq-job") for name in outer.threads)


def test_a_handler_raising_through_the_middleware_fails_its_attempt(app: chronoq.App) -> None:
    trail: list[str] = []
    app.middleware = (Recorder("only", trail),)

    @app.task(max_attempts=1)
    def broken() -> None:
        raise ValueError("no")

    broken.defer()
    assert drain(app).dead == 1
    assert trail == ["only in", "only out"]


def test_app_call_handler_runs_the_middleware(app: chronoq.App) -> None:
    trail: list[str] = []
    app.middleware = (Recorder("m", trail),)
    assert app.call_handler(lambda x: x * 2, 21) == 42
    assert trail == ["m in", "m out"]


def test_an_app_that_still_overrides_call_handler_keeps_working_with_a_warning(
    tmp_path: Path,
) -> None:
    seen: list[str] = []

    class LegacyApp(chronoq.App):
        wraps_handlers = True

        def call_handler(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            seen.append("sync")
            return super().call_handler(fn, *args, **kwargs)

        async def call_handler_async(
            self, fn: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
        ) -> Any:
            seen.append("async")
            return await fn(*args, **kwargs)

    with LegacyApp(f"sqlite:///{tmp_path / 'jobs.db'}") as app:

        @app.task
        def plain() -> None: ...

        @app.task
        async def awaited() -> None: ...

        plain.defer()
        awaited.defer()
        with pytest.warns(DeprecationWarning, match="App.middleware"):
            stats = drain(app, concurrency=1)
    assert stats.done == 2
    assert sorted(seen) == ["async", "sync"]
