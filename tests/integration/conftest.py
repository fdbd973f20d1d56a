"""Fixtures for the command's tests (test_cli.py and test_supervisor.py)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chronoq import App
from tests.integration.cli_support import APP_SOURCE, Spawner


@pytest.fixture
def spawner(tmp_path: Path) -> Iterator[Spawner]:
    spawned = Spawner(tmp_path)
    yield spawned
    spawned.kill_all()


@pytest.fixture
def write_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Writes an app module from its source and returns its `module:app`, importable here (cwd)
    and by subprocesses run in tmp_path."""
    written: list[str] = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))

    def write(source: str) -> str:
        name = f"chronoq_test_app_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(source)
        written.append(name)
        return f"{name}:app"

    yield write
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture
def app_spec(write_app: Callable[[str], str]) -> str:
    """`module:app` for the test app of the command's tests."""
    return write_app(APP_SOURCE)


@pytest.fixture
def url(dsn: str) -> str:
    """The database of the test, named the way the command takes it (a URL)."""
    return dsn


@pytest.fixture
def reader(url: str) -> Iterator[App]:
    """An App on the test database, to look at jobs the command made."""
    app = App(url)
    yield app
    app.close()
