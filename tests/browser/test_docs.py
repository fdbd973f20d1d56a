"""The API docs page in a real browser: Swagger UI renders from the server's own files under
the dashboard's CSP, which refuses nothing it needs and lets it fetch from no other host."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import ConsoleMessage, Page, Request, expect

from tests.browser.conftest import TIMEOUT_MS, Live

pytestmark = pytest.mark.slow

expect.set_options(timeout=TIMEOUT_MS)


def test_swagger_ui_renders_under_the_csp(page: Page, live: Live) -> None:
    complaints: list[str] = []
    elsewhere: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            complaints.append(message.text)

    def on_request(request: Request) -> None:
        if urlsplit(request.url).netloc not in ("", urlsplit(live.url).netloc):
            elsewhere.append(request.url)

    page.on("console", on_console)
    page.on("pageerror", lambda error: complaints.append(str(error)))
    page.on("request", on_request)
    answer = page.goto("/api/v1/docs")
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("chronoq")
    expect(page.locator(".opblock").first).to_be_visible()
    assert not complaints, complaints
    assert not [url for url in elsewhere if not url.startswith("data:")], elsewhere
