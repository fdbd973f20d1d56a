"""Caps on request bodies, enforced before anything is parsed and before anything is read that
the caller has not earned: a client cannot make the server buffer more than the largest request
it would accept from that client, nor hold a buffer open by sending it slowly.

Who the caller is decides the cap, from what the request's headers already prove:

- an API request (`/api/v1/...`) with a body must carry a token the server knows, or it is
  refused (401) unread; with one, it may send up to the API's limit (a batch of jobs);
- a dashboard form sent by a signed-in session may send a modest body;
- anyone else (the login form, a form without a session) a small one.

Every body must arrive whole within a deadline, or it is cut off (408); each refusal closes the
connection, so that the rest of a body is never read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import anyio
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chronoq.http.auth import Throttle, TokenTable, read_session, record_failure

KIB = 1024
BODY_SECONDS = 10.0  # for a whole body, from the first read
MIB = 1024 * KIB
API_PREFIX = "/api/v1/"


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The largest body each kind of caller may send, in bytes, and how long it may take."""

    api: int = 16 * MIB  # an API request with a known token: a batch of jobs
    session: int = MIB  # a dashboard form from a signed-in session: fields and job ids
    stranger: int = 16 * KIB  # everyone else: a login form is a few hundred bytes
    seconds: float = BODY_SECONDS


class _Refusal(Exception):
    def __init__(self, status: int, kind: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message
        self.retry_after = retry_after


class BodyLimit:
    """Reads a request's body, within the cap and the deadline its caller has, before the app
    sees it (whole: the app never waits on the client). Must run inside the session
    middleware, whose cookie it reads."""

    def __init__(
        self, app: ASGIApp, tokens: TokenTable, limits: BodyLimits, throttle: Throttle
    ) -> None:
        self.app, self.tokens, self.limits, self.throttle = app, tokens, limits, throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            limit = self._limit_for(scope)
            body = await self._read(receive, limit, _content_length(scope))
        except _Refusal as refusal:
            await _refuse(send, refusal)
            return
        if body is None:
            return  # the client went away
        await self.app(scope, _replay(body, receive), send)

    def _limit_for(self, scope: Scope) -> int:
        headers = Headers(scope=scope)
        if scope["path"].startswith(API_PREFIX):
            if not _has_body(headers):
                return self.limits.stranger  # the route answers: public, 401 or 429
            self._unless_throttled(scope)
            if self._known_bearer(headers):
                return self.limits.api
            self._failed(scope, "unknown token" if _bearer(headers) else "no bearer token")
            raise _Refusal(401, _unknown_bearer_kind(headers), "a valid bearer token is required")
        if self._signed_in(scope):
            return self.limits.session
        return self.limits.stranger

    def _known_bearer(self, headers: Headers) -> bool:
        return self.tokens.scope_of(_bearer(headers)) is not None

    def _unless_throttled(self, scope: Scope) -> None:
        """A client past its budget of failed authentications has its token left unchecked
        here, as the routes do (`http.auth.Throttle`)."""
        wait = self.throttle.wait(_client(scope))
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            message = f"too many failed authentications; try again in {seconds} s"
            raise _Refusal(429, "TooManyRequests", message, retry_after=seconds)

    def _failed(self, scope: Scope, reason: str) -> None:
        record_failure(self.throttle, _client(scope), scope["method"], scope["path"], reason)

    def _signed_in(self, scope: Scope) -> bool:
        # The session middleware has checked the cookie's signature and age already; what a
        # session proves is for auth alone to say.
        return "session" in scope and read_session(Request(scope)).signed_in

    async def _read(self, receive: Receive, limit: int, declared: int | None) -> bytes | None:
        if declared is not None and declared > limit:
            raise _too_large(limit)
        body = bytearray()
        with anyio.move_on_after(self.limits.seconds) as waited:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                body += message.get("body", b"")
                if len(body) > limit:  # a body sent without a length, or longer than it said
                    raise _too_large(limit)
                if not message.get("more_body", False):
                    return bytes(body)
        assert waited.cancelled_caught
        raise _Refusal(
            408,
            "RequestTimeout",
            f"the request body did not arrive within {self.limits.seconds:g} seconds",
        )


def _too_large(limit: int) -> _Refusal:
    message = f"the request body is over the limit of {limit} bytes"
    return _Refusal(413, "RequestTooLarge", message)


async def _refuse(send: Send, refusal: _Refusal) -> None:
    error = {"type": refusal.kind, "message": refusal.message, "field": None}
    body = json.dumps({"error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # The rest of the body is never read: the connection cannot carry another request.
        (b"connection", b"close"),
    ]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(refusal.retry_after).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the client's disconnect

    return replayed


def _bearer(headers: Headers) -> str | None:
    scheme, token = get_authorization_scheme_param(headers.get("authorization"))
    return token if scheme.lower() == "bearer" and token else None


def _client(scope: Scope) -> str:
    """The peer's address, as `http.auth.client_address` reads it."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _unknown_bearer_kind(headers: Headers) -> str:
    # The API's own names: no credentials at all, or credentials it does not know.
    scheme, token = get_authorization_scheme_param(headers.get("authorization"))
    return "InvalidToken" if scheme.lower() == "bearer" and token else "Unauthorized"


def _has_body(headers: Headers) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
