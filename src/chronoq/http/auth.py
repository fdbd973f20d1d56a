"""Bearer tokens and their scopes, shared by the HTTP API and the dashboard; the dashboard's
sessions and their CSRF tokens.

Tokens come from configuration (`admin_tokens`, `read_tokens`: comma-separated; environment
`CHRONOQ_ADMIN_TOKENS`, `CHRONOQ_READ_TOKENS`). An admin token may do everything; a read token
may only look. With no token configured the server is open, and `chronoq serve` then refuses
to bind anywhere but loopback.

A browser signs in once with a token and then carries a session: a cookie signed with the
server's secret (itsdangerous, through Starlette's session middleware) that holds the scope
the token granted and the CSRF token every form of the session must send back (and the
dashboard's flash messages, which are no part of who the browser is). What a session may do
is worked out from the cookie by `read_session` alone, and a session is opened by
`issue_session` alone: what sessions have to prove, and for how long, is decided there. The
dashboard's routes take their session from the FastAPI dependencies below, which raise
`SignInRequired` or `Refused` for the dashboard's exception handlers to answer.
"""

from __future__ import annotations

import enum
import hmac
import secrets
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Form, Request
from starlette.middleware.sessions import SessionMiddleware

from chronoq.config import Config
from chronoq.errors import ConfigError

MIN_TOKEN_LENGTH = 16
SESSION_COOKIE = "chronoq_session"
SESSION_SECONDS = 12 * 3600  # since the last request: each answer renews the cookie
_SCOPE_KEY = "scope"
_CSRF_KEY = "csrf"
_TOKENS_STATE = "session_tokens"  # where install_sessions leaves the token table on the server


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


def install_sessions(
    server: FastAPI, secret: str, tokens: TokenTable, *, https_only: bool = False
) -> None:
    """Sessions for `server`'s dashboard, signed with `secret` and granted by `tokens`."""
    setattr(server.state, _TOKENS_STATE, tokens)
    # The cookie is HttpOnly; SameSite=strict keeps it off every request another site starts,
    # on top of the CSRF token the forms carry.
    server.add_middleware(
        SessionMiddleware,
        secret_key=secret,
        session_cookie=SESSION_COOKIE,
        max_age=SESSION_SECONDS,
        same_site="strict",
        https_only=https_only,
    )


def read_session(request: Request) -> Session:
    """The session the request's cookie carries. The middleware has checked the cookie's
    signature and age; one that fails either arrives empty, as a stranger's. A session without
    a CSRF token is given one, so that a stranger's login form has one to send."""
    tokens, stored = _tokens(request), request.session
    csrf = stored.get(_CSRF_KEY)
    if not isinstance(csrf, str) or not csrf:
        csrf = stored[_CSRF_KEY] = secrets.token_urlsafe(32)
    return Session(_stored_scope(stored, tokens), csrf, tokens.open)


def issue_session(request: Request, scope: Scope) -> Session:
    """A new session of `scope`, written into the cookie the answer carries. Nothing the cookie
    held before survives it (a session planted in a browser, say), and its CSRF token is new."""
    session = Session(scope, secrets.token_urlsafe(32), _tokens(request).open)
    request.session.clear()
    request.session.update({_SCOPE_KEY: int(scope), _CSRF_KEY: session.csrf})
    return session


def sign_in(request: Request, token: str) -> Session | None:
    """A new session for a known token, or None for a token no table lists."""
    scope = _tokens(request).scope_of(token)
    return issue_session(request, scope) if scope is not None else None


def end_session(request: Request) -> None:
    request.session.clear()


def _tokens(request: Request) -> TokenTable:
    tokens = getattr(request.app.state, _TOKENS_STATE, None)
    if not isinstance(tokens, TokenTable):
        raise RuntimeError("this server has no sessions: call install_sessions() on it")
    return tokens


def _stored_scope(stored: MutableMapping[str, Any], tokens: TokenTable) -> Scope | None:
    if tokens.open:
        return Scope.ADMIN
    scope = stored.get(_SCOPE_KEY)
    try:
        return Scope(scope) if isinstance(scope, int) else None
    except ValueError:  # a scope this version does not know: sign in again
        return None


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
