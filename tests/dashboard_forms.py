"""Signing in to the dashboard through its form, for tests of the HTTP server."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from httpx2 import Response


def csrf_of(page: Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, "the page carries no CSRF field"
    return found.group(1)


def login(client: TestClient, token: str) -> str:
    """Sign in through the form; returns the session's CSRF token."""
    form = client.get("/login")
    answer = client.post("/login", data={"csrf": csrf_of(form), "token": token, "next": "/jobs"})
    assert answer.status_code == 200 and answer.url.path == "/jobs"
    return csrf_of(answer)
