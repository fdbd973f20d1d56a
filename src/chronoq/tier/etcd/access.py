"""Who the elector is to etcd: a user and password, TLS files, and the token etcd hands out.

```
 send(request) on member k
   ├─ no token yet for k ──► POST /v3/auth/authenticate {name, password} ──► token (header
   │                         Authorization on k's session from now on)
   ├─ answered ──────────────────────────────────────────────────────────────► result
   ├─ "invalid auth token", "revision of auth store is old", "user name is empty"
   │      └─► authenticate again and send the request once more
   └─ "authentication failed", "permission denied", "user name is empty" without a login
          └─► EtcdRefused: every member would say the same, so no other is tried
```

etcd's simple tokens live in the memory of each member: a member drops one after
`--auth-token-ttl` (5 minutes by default) without a request on that member, and a restarted
member knows only those it replays from its log. A leader that fails over to a member it has not
used for a while, or whose member restarted, finds its token unknown there; it authenticates
again on that member and goes on, so no leader stops leading because its token aged.

TLS is requests' own: `ca_file` replaces the system's CAs for the members' certificates (and
wins over REQUESTS_CA_BUNDLE, which requests would otherwise let replace it), and `cert_file`
with `key_file` is the client certificate sent to members started with `--client-cert-auth`.
The password is sent only in the authenticate request's body and never appears in a message or
a log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import requests
from etcd3gw import exceptions as etcd_errors
from etcd3gw.client import Etcd3Client

from chronoq.errors import ConfigError

T = TypeVar("T")

log = logging.getLogger("chronoq.coordination.etcd")

_AUTH_HEADER = "Authorization"
# etcd's messages (etcdserver/api/v3rpc/rpctypes) for a token it no longer knows: authenticate
# again. "user name is empty" means the request carried no token etcd accepts; with a login,
# that is a token to get again (authentication was switched on after we started).
_STALE_TOKEN = ("invalid auth token", "revision of auth store is old")
_NO_USER = "user name is empty"
_AUTH_OFF = "authentication is not enabled"
# With --client-cert-auth and authentication on, etcd's gateway answers any client certificate
# that has a Common Name with this (embed/serve.go), whatever the token.
_CN_REFUSED = "CommonName of client sending a request against gateway"
_REFUSED = ("authentication failed", "permission denied", "user name not found")


class EtcdRefused(Exception):
    """etcd answered, and refused this client: a wrong user or password, or no permission."""


@dataclass(frozen=True, slots=True)
class EtcdAccess:
    """How to authenticate to etcd; empty strings mean unused. Settings `etcd_username`,
    `etcd_password`, `etcd_ca_file`, `etcd_cert_file` and `etcd_key_file` are checked by
    `Config.validated`; this checks only what belongs together."""

    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        if bool(self.username) != bool(self.password):
            raise ConfigError("etcd_username and etcd_password must be set together")
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError("etcd_cert_file and etcd_key_file must be set together")

    def with_endpoint_login(self, texts: Sequence[str]) -> EtcdAccess:
        """This access, with the user:password@ the endpoints carry (all the same one)."""
        logins = {login for text in texts if (login := endpoint_login(text)) is not None}
        if not logins:
            return self
        if len(logins) > 1 or (self.username and logins != {(self.username, self.password)}):
            raise ConfigError(
                "the etcd endpoints carry more than one login, or one that differs from "
                "etcd_username and etcd_password: give one"
            )
        username, password = logins.pop()
        return replace(self, username=username, password=password)

    def client(self, protocol: str, host: str, port: int, api_path: str) -> Etcd3Client:
        """An etcd3gw client of one member, with these TLS files."""
        session = _PinnedSession(self.ca_file)
        if self.cert_file:
            session.cert = (self.cert_file, self.key_file)
        return Etcd3Client(
            host=host, port=port, protocol=protocol, api_path=api_path, session=session
        )


class _PinnedSession(requests.Session):
    """A session whose CA file, when one is given, wins over REQUESTS_CA_BUNDLE and
    CURL_CA_BUNDLE: requests lets those variables replace a session's own `verify`."""

    def __init__(self, ca_file: str) -> None:
        super().__init__()
        self._ca_file = ca_file
        if ca_file:
            self.verify = ca_file

    def merge_environment_settings(
        self,
        url: str,
        proxies: dict[str, str] | None,
        stream: bool | None,
        verify: Any,  # requests' private VerifyType and CertType
        cert: Any,
    ) -> dict[str, Any]:
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if self._ca_file:
            settings["verify"] = self._ca_file
        return settings


def endpoint_login(text: str) -> tuple[str, str] | None:
    """The percent-decoded (user, password) of `http://user:password@host:port`, if any."""
    parts = urlsplit(text)
    if parts.username is None or parts.password is None:
        return None
    return unquote(parts.username), unquote(parts.password)


class Login:
    """The token of each member's session: asked for at its first request, asked for again
    when etcd no longer knows it. Used under the gateway's lock."""

    def __init__(self, access: EtcdAccess) -> None:
        self.access = access
        self._auth_off: set[str] = set()  # members that said authentication is off
        self._warned_off = False

    def send(self, client: Etcd3Client, request: Callable[[Etcd3Client], T]) -> T:
        if self.access.username and not self._ready(client):
            self._authenticate(client)
        try:
            return request(client)
        except etcd_errors.Etcd3Exception as exc:
            message = error_message(exc)
            if not (self.access.username and _token_stale(message)):
                raise _refusal(message) or exc from None
        self._authenticate(client)
        return request(client)

    def _ready(self, client: Etcd3Client) -> bool:
        return _AUTH_HEADER in client.session.headers or client.base_url in self._auth_off

    def _authenticate(self, client: Etcd3Client) -> None:
        client.session.headers.pop(_AUTH_HEADER, None)
        self._auth_off.discard(client.base_url)
        body = {"name": self.access.username, "password": self.access.password}
        try:
            answer = client.post(client.get_url("/auth/authenticate"), json=body)
        except etcd_errors.Etcd3Exception as exc:
            message = error_message(exc)
            if _AUTH_OFF in message:
                self._note_auth_off(client)
                return
            raise _refusal(message) or exc from None
        client.session.headers[_AUTH_HEADER] = str(answer["token"])

    def _note_auth_off(self, client: Etcd3Client) -> None:
        self._auth_off.add(client.base_url)
        if not self._warned_off:
            self._warned_off = True
            log.warning(
                "etcd at %s has authentication off: the user %s is not used (requests are "
                "sent without a token until etcd asks for one)",
                client.base_url,
                self.access.username,
                extra={"action": "elector.auth_off"},
            )


def error_message(exc: etcd_errors.Etcd3Exception) -> str:
    """etcd's own message in a failed answer (the gateway's error bodies are JSON), or the
    text of the failure."""
    text = exc.detail_text or ""
    try:
        return str(json.loads(text)["message"])
    except (ValueError, TypeError, KeyError):
        return text


def _token_stale(message: str) -> bool:
    return any(words in message for words in _STALE_TOKEN) or _NO_USER in message


def _refusal(message: str) -> EtcdRefused | None:
    """An EtcdRefused saying what to change, when etcd refused who we are."""
    if _CN_REFUSED in message:
        return EtcdRefused(
            "etcd refuses a client certificate with a Common Name through its HTTP gateway "
            "while authentication is on: issue etcd_cert_file without a CN (a subject such as "
            "/O=chronoq); the user is etcd_username"
        )
    if _NO_USER in message:
        return EtcdRefused(
            "etcd has authentication on and no user is set: set etcd_username and "
            "etcd_password (CHRONOQ_ETCD_USERNAME, CHRONOQ_ETCD_PASSWORD)"
        )
    if "authentication failed" in message or "user name not found" in message:
        return EtcdRefused(
            "etcd refused the user name or password (etcd_username, etcd_password): "
            f"{_short(message)}"
        )
    if any(words in message for words in _REFUSED):
        return EtcdRefused(
            "etcd refused the request: the user has no permission on the key prefix "
            f"(grant its role readwrite on the prefix): {_short(message)}"
        )
    return None


def _short(message: str) -> str:
    return message.removeprefix("etcdserver: ")[:200]
