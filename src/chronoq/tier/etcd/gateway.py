"""The few etcd requests the elector makes, over etcd's HTTP gateway (etcd3gw), on several members.

```
 call(request, deadline)
   ├─► endpoint k   ── answer ─────────────────────────────► result (k stays the current one)
   ├─► endpoint k   ── refused / timed out / 5xx / TLS failed / an answer of the wrong shape
   │                     ──► rotate to k+1 and try again
   ├─► endpoint k   ── wrong user or password, no permission ──► EtcdRefused (access.py)
   └─► every endpoint failed once, or the deadline passed ──► EtcdUnreachable
```

etcd3gw talks to one host, so this module keeps one client per member and moves on to the next
member when one fails. Each attempt is bounded by the request timeout and by the caller's
deadline, whichever comes first, so one call never outlasts the time the caller has.

Keys and values are base64 in the gateway's JSON, and 64-bit numbers are strings; `KeyValue`
is a key as Python sees it. Transactions are written raw: etcd3gw's `create()` answers only
yes or no, where the elector needs the key's `create_revision` (the epoch of a leadership).
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests
from etcd3gw import exceptions as etcd_errors
from etcd3gw.client import Etcd3Client

from chronoq.errors import ConfigError
from chronoq.storage.dsn import redact
from chronoq.tier.etcd.access import EtcdAccess, Login, error_message

T = TypeVar("T")

API_PATH = "/v3/"  # etcd >= 3.4; naming it saves a /version request per member
# What a failed attempt on one member may raise: etcd3gw's errors, requests' (OSError covers
# them and a TLS file that cannot be read), and an answer that is not JSON or not of the shape
# the request expects (a missing key, a list for an object, ...).
_MEMBER_FAILURES = (
    etcd_errors.Etcd3Exception,
    OSError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
)


class EtcdUnreachable(Exception):
    """No etcd member answered in time."""


class LeaseNotFound(Exception):
    """etcd has no lease of that id (it expired or was revoked)."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: str
    create_revision: int
    lease: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    protocol: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """`http://host:port` (or https, optionally with user:password@, see `EtcdAccess`) as an
    `Endpoint`; anything else is a ConfigError naming it (without its password)."""
    problem = f"etcd endpoint {redact(text)!r} is not of the form http://host:port"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{problem} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise ConfigError(problem)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(problem)
    return Endpoint(parts.scheme, parts.hostname, port)


def parse_endpoints(texts: Sequence[str]) -> list[Endpoint]:
    if isinstance(texts, str) or not texts:
        raise ConfigError("etcd endpoints must be a non-empty list of http://host:port URLs")
    return [parse_endpoint(text) for text in texts]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode(errors="replace")


def _range_end(prefix: str) -> str:
    """The first key after every key that starts with `prefix` (etcd's prefix range)."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode()


def _key_value(item: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=_unb64(item["key"]),
        value=_unb64(item.get("value", "")),
        create_revision=int(item.get("create_revision", 0)),
        lease=int(item.get("lease", 0)),
    )


def _last_range(answer: dict[str, Any]) -> KeyValue | None:
    """The key read by the last operation of a transaction (a range), if it exists."""
    kvs = answer.get("responses", [{}])[-1].get("response_range", {}).get("kvs", [])
    return _key_value(kvs[0]) if kvs else None


class Gateway:
    """Thread-safe access to etcd through one of `endpoints`, rotating on failure."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        request_timeout: float,
        access: EtcdAccess | None = None,
    ) -> None:
        self.endpoints = list(endpoints)
        self._timeout = request_timeout
        self._login = Login(access or EtcdAccess())
        self._clients = [
            self._login.access.client(e.protocol, e.host, e.port, API_PATH) for e in self.endpoints
        ]
        self._current = 0
        self._lock = threading.Lock()

    def call(self, request: Callable[[Etcd3Client], T], deadline: float) -> T:
        """`request` on the current member, then on the next ones while it fails; each member
        is tried at most once, and never past `deadline` (time.monotonic())."""
        with self._lock:
            failures: list[str] = []
            for _ in self._clients:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    failures.append("no answer in time")
                    break
                client = self._clients[self._current]
                client.timeout = min(self._timeout, remaining)
                try:
                    return self._login.send(client, request)
                except _MEMBER_FAILURES as exc:
                    failures.append(f"{client.base_url}: {_describe(exc)}")
                    self._current = (self._current + 1) % len(self._clients)
            raise EtcdUnreachable("; ".join(failures))

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.session.close()

    # The requests. Each one is safe to send again after a timeout that may have hidden its
    # success: a grant only leaks a lease that expires, the others are idempotent or guarded.

    def grant(self, ttl: int, deadline: float) -> int:
        def grant(client: Etcd3Client) -> int:
            answer = client.post(client.get_url("/lease/grant"), json={"TTL": ttl, "ID": 0})
            return int(answer["ID"])

        return self.call(grant, deadline)

    def keepalive(self, lease: int, deadline: float) -> int:
        """The lease's TTL after renewal; raises LeaseNotFound when it is gone."""

        def keepalive(client: Etcd3Client) -> int:
            answer = client.post(client.get_url("/lease/keepalive"), json={"ID": lease})
            # The gateway answers a keep-alive of a lease it does not know with no TTL.
            return int(answer["result"].get("TTL", -1))

        ttl = self.call(keepalive, deadline)
        if ttl <= 0:
            raise LeaseNotFound(str(lease))
        return ttl

    def revoke(self, lease: int, deadline: float) -> bool:
        """Revoke the lease (deleting its keys); False when etcd had no such lease."""

        def revoke(client: Etcd3Client) -> bool:
            try:
                client.post(client.get_url("/kv/lease/revoke"), json={"ID": lease})
            except etcd_errors.Etcd3Exception as exc:
                if "lease not found" in (exc.detail_text or ""):
                    return False
                raise
            return True

        return self.call(revoke, deadline)

    def put(self, key: str, value: str, lease: int, deadline: float) -> None:
        body = {"key": _b64(key), "value": _b64(value), "lease": lease}
        self.call(lambda client: client.post(client.get_url("/kv/put"), json=body), deadline)

    def range_prefix(self, prefix: str, deadline: float) -> list[KeyValue]:
        """Every key under `prefix`, read linearizably (never a stale member's copy)."""
        body = {"key": _b64(prefix), "range_end": _range_end(prefix)}

        def read(client: Etcd3Client) -> list[KeyValue]:
            answer = client.post(client.get_url("/kv/range"), json=body)
            return [_key_value(item) for item in answer.get("kvs", [])]

        return self.call(read, deadline)

    def create(self, key: str, value: str, lease: int, deadline: float) -> KeyValue | None:
        """Create `key` only if absent, bound to `lease`; either way, the key as it is after the
        transaction (None if it does not exist). Ours when its lease is `lease`."""
        read = {"request_range": {"key": _b64(key)}}
        txn = {
            "compare": [
                {"key": _b64(key), "result": "EQUAL", "target": "CREATE", "create_revision": 0}
            ],
            "success": [
                {"request_put": {"key": _b64(key), "value": _b64(value), "lease": lease}},
                read,
            ],
            "failure": [read],
        }
        return self.call(lambda client: _last_range(dict(client.transaction(txn))), deadline)

    def check_writable(self, key: str, deadline: float) -> None:
        """Raise EtcdRefused if this client may not write `key`; nothing is written: etcd checks
        the permission of every operation of a transaction, also of a branch never taken."""
        never = {"key": _b64(key), "result": "LESS", "target": "VERSION", "version": 0}
        txn = {
            "compare": [never],
            "success": [{"request_put": {"key": _b64(key), "value": ""}}],
            "failure": [],
        }
        self.call(lambda client: client.transaction(txn), deadline)

    def delete_if_created_at(self, key: str, create_revision: int, deadline: float) -> bool:
        """Delete `key` only if it is the one created at `create_revision`, so a successor's key
        of the same name is never deleted; True when it was deleted."""
        txn = {
            "compare": [
                {
                    "key": _b64(key),
                    "result": "EQUAL",
                    "target": "CREATE",
                    "create_revision": create_revision,
                }
            ],
            "success": [{"request_delete_range": {"key": _b64(key)}}],
            "failure": [],
        }
        return self.call(lambda client: bool(client.transaction(txn).get("succeeded")), deadline)


def _describe(exc: Exception) -> str:
    """One short line for a failed request (requests' own messages repeat the whole URL)."""
    if isinstance(exc, etcd_errors.ConnectionTimeoutError | requests.Timeout):
        return "timed out"
    if isinstance(exc, KeyError | IndexError | TypeError | AttributeError):
        return f"unexpected answer ({type(exc).__name__}: {exc})"[:200]
    text = error_message(exc) if isinstance(exc, etcd_errors.Etcd3Exception) else str(exc)
    text = text or type(exc).__name__
    if "Connection refused" in text:
        return "connection refused"
    return _describe_tls(text) or text[:200]


_VERIFY_FAILED = re.compile(r"certificate verify failed: ([^(')]+)")
_SSL_REASON = re.compile(r"\[SSL: \w+\] ([^(')]+)")
# How a member that wants a client certificate ends a handshake without one, or with one it
# does not trust (the alert under TLS 1.2, an abrupt end under TLS 1.3).
_CLIENT_REFUSED = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "SSLEOFError")


def _describe_tls(text: str) -> str | None:
    """What a TLS failure means for the settings, or None when `text` is no TLS failure."""
    if found := _VERIFY_FAILED.search(text):
        return (
            f"TLS: the member's certificate is not trusted ({found[1].strip()}): "
            "etcd_ca_file must name the CA that signed it"
        )
    if any(words in text for words in _CLIENT_REFUSED):
        return (
            "TLS: the member ended the handshake: does it want a client certificate "
            "(etcd_cert_file, etcd_key_file) signed by a CA it trusts?"
        )
    if "WRONG_VERSION_NUMBER" in text:
        return "TLS: the member does not speak TLS on this port (an http:// endpoint?)"
    if "SSLError" in text:
        reason = _SSL_REASON.search(text)
        return f"TLS failed: {reason[1].strip() if reason else text[:160]}"
    return None
