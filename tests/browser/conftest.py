"""Fixtures of the browser tests: Debian's Chromium through Playwright, and a live dashboard
served by uvicorn over a SQLite app that a real worker works."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

import chronoq
from chronoq.http.auth import TokenTable
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.metrics import Metrics
from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, require_chromium, serving
from tests.browser.tasks import build_app
from tests.helpers import RecordingSignals, running_worker

ADMIN = "admin-token-0123456789abcdef"
READER = "read-token-0123456789abcdef"
TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class Live:
    url: str
    app: chronoq.App
    signals: RecordingSignals


# Module scope, not session: Playwright's sync API keeps an event loop running on the main
# thread while it is open, and every later test that calls asyncio.run() would fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    app = build_app(f"sqlite:///{tmp_path / 'jobs.db'}")
    metrics = Metrics()
    app.metrics = metrics
    server = create_server(HttpContext(app, TokenTable(admin=(ADMIN,), read=(READER,)), metrics))
    options = chronoq.WorkerOptions(poll_interval=0.2, rescue_interval=0.5, concurrency=4)
    with serving(server) as url, running_worker(app, options) as (_, signals):
        yield Live(url, app, signals)
    app.close()


@pytest.fixture
def page(browser: Browser, live: Live) -> Iterator[Page]:
    context = browser.new_context(base_url=live.url, viewport={"width": 1360, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    # The dashboard asks before destructive actions; the tests mean them.
    opened.on("dialog", lambda dialog: dialog.accept())
    yield opened
    context.close()
