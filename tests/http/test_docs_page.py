"""The API docs page: Swagger UI from the server's own files, under the dashboard's CSP."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from chronoq.http.dashboard import PAGE_HEADERS

ASSETS = {
    "/static/swagger/swagger-ui-bundle.js": "javascript",
    "/static/swagger/init.js": "javascript",
    "/static/swagger/swagger-ui.css": "text/css",
    "/static/swagger/favicon-32x32.png": "image/png",
    "/static/swagger/LICENSE": "",
}


def _references(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]*)"', html)


def test_the_docs_page_loads_nothing_from_another_host(client: TestClient) -> None:
    page = client.get("/api/v1/docs")
    assert page.status_code == 200
    references = _references(page.text)
    assert len(references) == 4
    for reference in references:
        assert reference.startswith("/static/swagger/"), reference
    assert "//" not in page.text.replace("<!doctype html>", "")


def test_the_docs_page_runs_no_inline_script(client: TestClient) -> None:
    page = client.get("/api/v1/docs").text
    for script in re.findall(r"<script([^>]*)>(.*?)</script>", page, re.DOTALL):
        attributes, body = script
        assert "src=" in attributes and not body.strip()


def test_the_docs_page_carries_the_dashboards_csp(client: TestClient) -> None:
    headers = client.get("/api/v1/docs").headers
    policy = headers["Content-Security-Policy"]
    assert policy == PAGE_HEADERS["Content-Security-Policy"]
    assert "unsafe-inline" not in policy
    assert headers["X-Frame-Options"] == "DENY"


def test_the_vendored_assets_are_served(client: TestClient) -> None:
    for path, kind in ASSETS.items():
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert kind in answer.headers["content-type"], path
        assert answer.content, path


def test_redoc_is_not_served(client: TestClient) -> None:
    assert client.get("/redoc").status_code == 404
    assert client.get("/api/v1/redoc").status_code == 404
