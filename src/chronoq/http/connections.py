"""How `chronoq serve` holds its connections: uvicorn's HTTP/1.1 protocol (h11), with a deadline
for a request's headers, which uvicorn does not have. uvicorn bounds the rest: the size of
unfinished headers (`h11_max_incomplete_event_size`), the idle time between requests
(`timeout_keep_alive`) and how many connections it serves at once (`limit_concurrency`, 503
past it); the body's deadline is `limits.BodyLimit`'s."""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0
HEADER_BYTES = 16 * 1024  # what the request line and headers of a browser's request take
KEEP_ALIVE_SECONDS = 5


class HeaderDeadline(H11Protocol):
    """Closes a connection whose request's headers have not all arrived `header_seconds`
    after the server began waiting for them: a client that drips them cannot hold it open."""

    header_seconds = HEADER_SECONDS
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is h11.IDLE:
            self._await_headers()  # from the first byte awaited, not from the last one sent
        else:
            self._stop_waiting()

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_seconds, self._headers_late)

    def _stop_waiting(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def with_header_deadline(seconds: float) -> type[HeaderDeadline]:
    """The protocol class to give uvicorn (it builds one per connection)."""
    return type("HeaderDeadlineProtocol", (HeaderDeadline,), {"header_seconds": seconds})
