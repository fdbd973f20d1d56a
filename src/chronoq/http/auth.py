"""Bearer tokens and their scopes, shared by the HTTP API and the dashboard; the dashboard's
sessions and their CSRF tokens.

Tokens come from configuration (`admin_tokens`, `read_tokens`: comma-separated; environment
`CHRONOQ_ADMIN_TOKENS`, `CHRONOQ_READ_TOKENS`). An admin token may do everything; a read token
may only look. With no token configured the server is open, and `chronoq serve` then refuses
to bind anywhere but loopback.

A browser signs in once with a token and then carries a session: a cookie signed with the
server's secret (itsdangerous, through Starlette's session middleware) that holds the session's
id, when it was opened, a fingerprint of the token that opened it, and the CSRF token every
form of the session must send back (and the dashboard's flash messages, which are no part of
who the browser is). What a session may do is worked out from the cookie by `read_session`
with `Sessions`, the server's side of the sessions (which tokens are configured, which
sessions were logged out, how long a session lasts), and a session is opened by
`issue_session` alone. The dashboard's routes take their session from the FastAPI
dependencies below, which raise `SignInRequired` or `Refused` for the dashboard's exception
handlers to answer.

Failed authentications, at `/login` and with bearer tokens on the API, are counted per client
address by one `Throttle`: past a small budget, the address is answered 429 until it has
regained a try, without its credential being looked at. Each failure is logged at WARNING
with the address, the route and the reason, never with what was presented.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Form, Request
from starlette.applications import Starlette
from starlette.middleware.sessions import SessionMiddleware

from chronoq.config import Config
from chronoq.errors import ConfigError

MIN_TOKEN_LENGTH = 16
SESSION_COOKIE = "chronoq_session"
SESSION_LIFETIME = 12 * 3600.0  # seconds from sign-in, however active the session is
SESSION_IDLE = 2 * 3600.0  # seconds without a request after which a session ends
THROTTLE_BUDGET = 10  # failed authentications an address may make at once...
THROTTLE_WINDOW = 60.0  # ...and regains over this many seconds
THROTTLE_MAX_CLIENTS = 10_000  # addresses tracked at most
_CLOCK_SKEW = 300  # seconds a session may seem opened in the future (servers' clocks differ)
_ID_KEY, _TOKEN_KEY, _OPENED_KEY, _SEEN_KEY, _CSRF_KEY = "sid", "token", "opened", "seen", "csrf"
_SESSIONS_STATE, _THROTTLE_STATE = "sessions", "auth_throttle"  # where install_sessions puts them
_FINGERPRINT_CONTEXT = b"chronoq session token\0"  # keeps these HMACs apart from any other
_log = logging.getLogger(__name__)


class Scope(enum.IntEnum):
    """What a caller may do; a higher scope includes the lower ones."""

    READ = 1
    ADMIN = 2


@dataclass(frozen=True, slots=True)
class TokenTable:
    admin: tuple[str, ...] = ()
    read: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Config) -> TokenTable:
        table = cls(
            _split("admin_tokens", config.admin_tokens), _split("read_tokens", config.read_tokens)
        )
        if set(table.admin) & set(table.read):
            raise ConfigError("a token is listed both in admin_tokens and in read_tokens")
        return table

    @property
    def open(self) -> bool:
        """No token configured: every caller is an admin (loopback only)."""
        return not (self.admin or self.read)

    def scope_of(self, token: str | None) -> Scope | None:
        """The scope a presented token grants, or None. Every configured token is compared,
        in constant time each, so the time taken says nothing about which one nearly matched."""
        if self.open:
            return Scope.ADMIN
        if not token:
            return None
        presented = token.encode("utf-8", "surrogateescape")
        granted: Scope | None = None
        for scope, tokens in ((Scope.ADMIN, self.admin), (Scope.READ, self.read)):
            for known in tokens:
                if hmac.compare_digest(presented, known.encode("utf-8")) and granted is None:
                    granted = scope
        return granted


def _split(setting: str, raw: str) -> tuple[str, ...]:
    tokens = tuple(part.strip() for part in raw.split(",") if part.strip())
    for token in tokens:
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(
                f"setting {setting!r}: a token must be at least {MIN_TOKEN_LENGTH} characters"
            )
    return tokens


# -- sessions -------------------------------------------------------------------------------

Csrf = Annotated[str, Form()]


@dataclass(frozen=True, slots=True)
class Session:
    """A browser's session: the scope it was opened with (None: not signed in), the CSRF token
    its forms carry, and whether the server is open (no token configured: all are admins)."""

    scope: Scope | None
    csrf: str
    open: bool

    @property
    def signed_in(self) -> bool:
        return self.scope is not None

    @property
    def admin(self) -> bool:
        return self.scope is Scope.ADMIN

    @property
    def role(self) -> str:
        return "admin" if self.admin else "read-only"

    def csrf_matches(self, csrf: str) -> bool:
        """Is `csrf` this session's CSRF token, so that the form came from one of its pages?
        Compared in constant time, like every secret."""
        if not csrf or not self.csrf:
            return False
        return hmac.compare_digest(
            csrf.encode("utf-8", "surrogateescape"), self.csrf.encode("utf-8", "surrogateescape")
        )


class SignInRequired(Exception):
    """A request that needs a signed-in session came without one. `page`: a page was asked
    for, and the browser is best sent to the login form; otherwise data a page polls."""

    def __init__(self, *, page: bool) -> None:
        super().__init__("sign in first")
        self.page = page


class Refused(Exception):
    """A form its session may not send: its CSRF token is not the session's, or the session's
    scope is too low. The message is for the person who sent it."""

    def __init__(self, session: Session, message: str) -> None:
        super().__init__(message)
        self.session, self.message = session, message


class Sessions:
    """The server's side of the sessions: what a cookie must still prove when it comes back.

    A cookie holds the session's id, when it was opened and last seen, and a fingerprint of
    the token that opened it (an HMAC of the token under the session secret: never the token).
    It reads as signed in only while a configured token has that fingerprint (its scope is the
    token's scope now, not the one it had), the session is younger than `lifetime` and was
    seen within `idle`, and its id was not revoked by a logout. Revocations are kept in this
    process's memory until the lifetime of the session they end has passed: with several
    servers sharing a secret, a logout binds the server that took it, and the lifetime bounds
    the rest. `clock` (wall-clock seconds, since a session outlives a restart) is a parameter
    for tests."""

    def __init__(
        self,
        secret: str,
        tokens: TokenTable,
        *,
        lifetime: float = SESSION_LIFETIME,
        idle: float = SESSION_IDLE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens, self.lifetime, self.idle, self.clock = tokens, lifetime, idle, clock
        self._key = secret.encode("utf-8")
        self._scopes = {self.fingerprint(t): Scope.ADMIN for t in tokens.admin} | {
            self.fingerprint(t): Scope.READ for t in tokens.read
        }
        self._revoked: dict[str, float] = {}  # session id -> when that session would end
        self._lock = threading.Lock()

    def fingerprint(self, token: str) -> str:
        """What a cookie holds of its token: an HMAC under the session secret, which says
        nothing of the token to whoever reads the cookie (cookies are signed, not sealed)."""
        raw = _FINGERPRINT_CONTEXT + token.encode("utf-8", "surrogateescape")
        return hmac.new(self._key, raw, hashlib.sha256).hexdigest()

    def open_session(self, stored: MutableMapping[str, Any], token: str) -> None:
        """Write a new session, opened now with `token`, into the cookie's contents."""
        now = int(self.clock())
        stored[_ID_KEY] = secrets.token_urlsafe(16)
        stored[_TOKEN_KEY] = self.fingerprint(token)
        stored[_OPENED_KEY] = stored[_SEEN_KEY] = now

    def scope_of(self, stored: MutableMapping[str, Any]) -> Scope | None:
        """The scope a cookie's session still has, or None if it has ended (or never began).
        A session still going is marked as seen now."""
        if self.tokens.open:
            return Scope.ADMIN
        fields = _session_fields(stored)
        if fields is None:
            return None
        session_id, fingerprint, opened, seen = fields
        now = self.clock()
        if not (now - self.lifetime < opened <= now + _CLOCK_SKEW and now - seen < self.idle):
            return None
        if self._is_revoked(session_id):
            return None
        scope = self._scopes.get(fingerprint)
        if scope is not None:
            stored[_SEEN_KEY] = int(now)
        return scope

    def revoke(self, stored: MutableMapping[str, Any]) -> None:
        """End the cookie's session on this server, whoever replays the cookie later."""
        fields = _session_fields(stored)
        if fields is None:
            return
        now = self.clock()
        with self._lock:
            # Forget revocations of sessions that have ended anyway, so the table stays as
            # small as the logouts of one lifetime.
            self._revoked = {sid: end for sid, end in self._revoked.items() if end > now}
            self._revoked[fields[0]] = fields[2] + self.lifetime

    def _is_revoked(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._revoked


def _session_fields(stored: MutableMapping[str, Any]) -> tuple[str, str, int, int] | None:
    """A cookie's session id, token fingerprint, opening and last-seen times, if well formed."""
    session_id, fingerprint = stored.get(_ID_KEY), stored.get(_TOKEN_KEY)
    opened, seen = stored.get(_OPENED_KEY), stored.get(_SEEN_KEY)
    if not (isinstance(session_id, str) and isinstance(fingerprint, str)):
        return None
    if not (type(opened) is int and type(seen) is int):
        return None
    return session_id, fingerprint, opened, seen


def install_sessions(
    server: FastAPI,
    secret: str,
    tokens: TokenTable,
    *,
    https_only: bool = False,
    throttle: Throttle | None = None,
) -> None:
    """Sessions for `server`'s dashboard, signed with `secret` and granted by `tokens`, and the
    throttle of failed authentications that the dashboard and the API share (`throttle`, when
    a middleware shares it too)."""
    setattr(server.state, _SESSIONS_STATE, Sessions(secret, tokens))
    setattr(server.state, _THROTTLE_STATE, throttle or Throttle())
    # The cookie is HttpOnly; SameSite=strict keeps it off every request another site starts,
    # on top of the CSRF token the forms carry. Its max_age is only the browser's bound: what
    # ends a session is decided by `Sessions`.
    server.add_middleware(
        SessionMiddleware,
        secret_key=secret,
        session_cookie=SESSION_COOKIE,
        max_age=int(SESSION_LIFETIME),
        same_site="strict",
        https_only=https_only,
    )


def server_sessions(server: Starlette) -> Sessions:
    """The `Sessions` that `install_sessions` gave `server`."""
    sessions = getattr(server.state, _SESSIONS_STATE, None)
    if not isinstance(sessions, Sessions):
        raise RuntimeError("this server has no sessions: call install_sessions() on it")
    return sessions


def read_session(request: Request) -> Session:
    """The session the request's cookie carries. The middleware has checked the cookie's
    signature; one that fails it arrives empty, as a stranger's. A session that has ended
    (logged out, too old, idle too long, or opened with a token no longer configured) is
    emptied, and its browser is a stranger again. A session without a CSRF token is given
    one, so that a stranger's login form has one to send."""
    sessions, stored = server_sessions(request.app), request.session
    scope = sessions.scope_of(stored)
    if scope is None and _ID_KEY in stored:
        stored.clear()
    csrf = stored.get(_CSRF_KEY)
    if not isinstance(csrf, str) or not csrf:
        csrf = stored[_CSRF_KEY] = secrets.token_urlsafe(32)
    return Session(scope, csrf, sessions.tokens.open)


def issue_session(request: Request, token: str, scope: Scope) -> Session:
    """A new session opened with `token` (of `scope`), written into the cookie the answer
    carries. Nothing the cookie held before survives it (a session planted in a browser, say),
    and its CSRF token is new."""
    sessions = server_sessions(request.app)
    session = Session(scope, secrets.token_urlsafe(32), sessions.tokens.open)
    request.session.clear()
    sessions.open_session(request.session, token)
    request.session[_CSRF_KEY] = session.csrf
    return session


def sign_in(request: Request, token: str) -> Session | None:
    """A new session for a known token, or None for a token no table lists."""
    scope = server_sessions(request.app).tokens.scope_of(token)
    return issue_session(request, token, scope) if scope is not None else None


def end_session(request: Request) -> None:
    """Log out: the session is revoked, so a copy of its cookie kept elsewhere is refused."""
    server_sessions(request.app).revoke(request.session)
    request.session.clear()


# -- throttling and logging failed authentications ------------------------------------------


class Throttle:
    """Failed authentications per client address, as token buckets: each address may fail
    `budget` times at once, and regains one try every `window / budget` seconds. An address
    with no try left is refused before its credential is looked at. At most `max_clients`
    addresses are tracked; past that, the one that failed longest ago is forgotten. `clock`
    (monotonic seconds) is a parameter for tests."""

    def __init__(
        self,
        budget: int = THROTTLE_BUDGET,
        window: float = THROTTLE_WINDOW,
        *,
        max_clients: int = THROTTLE_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budget, self.rate, self.max_clients = budget, budget / window, max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tries, at
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before `client` may try again; 0 if it may now."""
        with self._lock:
            tries = self._tries(client, self.clock())
        return 0.0 if tries >= 1 else (1 - tries) / self.rate

    def failed(self, client: str) -> None:
        """Count a failed authentication of `client`."""
        with self._lock:
            now = self.clock()
            self._buckets[client] = (self._tries(client, now) - 1, now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)

    def _tries(self, client: str, now: float) -> float:
        tries, at = self._buckets.get(client, (float(self.budget), now))
        return min(float(self.budget), tries + (now - at) * self.rate)


def server_throttle(server: Starlette) -> Throttle:
    """The `Throttle` that `install_sessions` gave `server`."""
    throttle = getattr(server.state, _THROTTLE_STATE, None)
    if not isinstance(throttle, Throttle):
        raise RuntimeError("this server has no throttle: call install_sessions() on it")
    return throttle


def client_address(request: Request) -> str:
    """The address of the peer (not of a header, which any client may write)."""
    return request.client.host if request.client else "unknown"


def throttled_for(request: Request) -> int | None:
    """Whole seconds before the request's client may authenticate again (its `Retry-After`),
    or None when it may now."""
    wait = server_throttle(request.app).wait(client_address(request))
    if wait <= 0:
        return None
    _log.debug("throttled %s on %s", client_address(request), request.url.path)
    return max(1, math.ceil(wait))


def authentication_failed(request: Request, reason: str) -> None:
    """Count a failed authentication against the request's client, and log it (never what
    was presented). Throttled requests are not logged, which bounds these lines too."""
    throttle = server_throttle(request.app)
    record_failure(throttle, client_address(request), request.method, request.url.path, reason)


def record_failure(throttle: Throttle, client: str, method: str, route: str, reason: str) -> None:
    """`authentication_failed`, for code that holds an ASGI scope rather than a Request."""
    throttle.failed(client)
    _log.warning(
        "authentication failed from %s on %s %s: %s",
        client,
        method,
        route,
        reason,
        extra={"action": "auth.failed", "client": client, "route": route, "reason": reason},
    )


# -- the dependencies of the dashboard's routes ---------------------------------------------


def visitor(request: Request) -> Session:
    """Any session, signed in or not (the login form's)."""
    return read_session(request)


def page_reader(request: Request) -> Session:
    """A signed-in session, for a page."""
    return _signed_in(read_session(request), page=True)


def data_reader(request: Request) -> Session:
    """A signed-in session, for the data a page polls."""
    return _signed_in(read_session(request), page=False)


def _signed_in(session: Session, *, page: bool) -> Session:
    if not session.signed_in:
        raise SignInRequired(page=page)
    return session


def form_sender(refusal: str) -> Callable[[Request, str], Session]:
    """A dependency for a route forms post to: the session that sent the form, once the form's
    CSRF token shows it came from the session's own pages; `refusal` tells otherwise."""

    def sender(request: Request, csrf: Csrf = "") -> Session:
        session = read_session(request)
        if not session.csrf_matches(csrf):
            raise Refused(session, refusal)
        return session

    return sender


def admin_sender(refusal: str, not_admin: str) -> Callable[[Request, str], Session]:
    """As `form_sender`, for an action: the session must also be an admin's (`not_admin` tells
    a session of lower scope why not)."""
    sent = form_sender(refusal)

    def admin(request: Request, csrf: Csrf = "") -> Session:
        session = sent(request, csrf)
        if not session.admin:
            raise Refused(session, not_admin)
        return session

    return admin
