"""Redirects that name no host: Starlette builds the location of the redirects it makes itself
(`/static` to `/static/`, a path's trailing slash) from the request's `Host` header, which the
client chose, so a forged header would send the browser to another site. The location is cut
to its path here, once for the whole app."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class RelativeRedirects:
    """Makes a redirect's `location` relative when it names the host the request named."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")

        async def send_relative(message: Message) -> None:
            if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
                headers = MutableHeaders(scope=message)
                location = headers.get("location")
                if location is not None:
                    headers["location"] = relative_to(location, host)
            await send(message)

        await self.app(scope, receive, send_relative)


def relative_to(location: str, host: str) -> str:
    """`location` without its scheme and host when its host is `host`."""
    parts = urlsplit(location)
    if not parts.netloc:
        return location  # relative already
    if parts.netloc.lower() != host.lower():
        return location  # a redirect to another site, made on purpose
    # One leading slash only: `//evil.example/` would be another host again, to a browser.
    path = "/" + parts.path.lstrip("/\\")
    return urlunsplit(("", "", path, parts.query, parts.fragment))
