"""DSNs: which store a DSN names, and how to show it without its password."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from chronoq.errors import InvalidDSN

DEFAULT_DSN = "sqlite:///chronoq.db"
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
# In `scheme://user:password@host/...` the password is taken to run to the last `@` followed by
# a host, so an unescaped `@`, `/` or `?` inside it is hidden too. When a later `@` is in the
# query string this hides more than the password, never less.
_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)(.*)(@[^@/?#]*(?:[/?#]|$))", re.DOTALL)
# A parameter is taken for a secret when its name holds one of these words: `password`,
# `sslpassword`, and whatever a driver or proxy adds later (`api_key`, `auth_token`, ...). Hiding
# a harmless `sslkey` path is the price of never showing a secret one.
_SECRET_WORDS = ("password", "secret", "token", "key")
_QUERY_PARAMETER = re.compile(r"([?&])([^=&#]*)=([^&#]*)")
# In `key=value` form a value is quoted ('...' with \' escapes) or runs to the next unescaped
# whitespace (libpq reads `a\ b` as "a b").
_KV_PARAMETER = re.compile(
    r"(?<!\S)(\w+)(\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|\S)+)", re.IGNORECASE | re.DOTALL
)
_HIDDEN = "***"
# PostgreSQL keeps at most this many bytes of a session's application_name (NAMEDATALEN - 1).
_SESSION_NAME_BYTES = 63


def redact(dsn: str) -> str:
    """The DSN with its password and every secret parameter replaced by `***`, safe to print
    and log."""
    if _URL.match(dsn):
        return _QUERY_PARAMETER.sub(_hide_query_value, _PASSWORD_IN_URL.sub(r"\1***\3", dsn))
    return _KV_PARAMETER.sub(_hide_kv_value, dsn)


def is_secret_parameter(name: str) -> bool:
    """Does a DSN parameter of this name (percent-encoded or not) carry a secret?"""
    plain = unquote(name).strip().lower()
    return any(word in plain for word in _SECRET_WORDS)


def _hide_query_value(found: re.Match[str]) -> str:
    if not is_secret_parameter(found[2]):
        return found[0]
    return f"{found[1]}{found[2]}={_HIDDEN}"


def _hide_kv_value(found: re.Match[str]) -> str:
    if not is_secret_parameter(found[1]):
        return found[0]
    return f"{found[1]}{found[2]}{_HIDDEN}"


def store_kind(dsn: str) -> str:
    """`sqlite` or `postgres`, or InvalidDSN naming what is wrong."""
    if not dsn or not dsn.strip():
        raise InvalidDSN("the DSN is empty: use sqlite:///path.db or postgresql://user@host/db")
    if "\x00" in dsn:
        raise InvalidDSN(f"the DSN {redact(dsn)!r} contains a NUL character")
    scheme = dsn.split(":", 1)[0].lower() if ":" in dsn else ""
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    raise InvalidDSN(
        f"unsupported DSN {redact(dsn)!r}: it must start with sqlite:/// or postgresql://"
    )


def session_name(worker_id: str) -> str:
    """The name (PostgreSQL's `application_name`) of the database sessions of the worker
    `worker_id`: the id itself, or a digest of it where the server would not keep the id whole
    (longer than 63 bytes, or other than printable ASCII)."""
    if worker_id.isascii() and worker_id.isprintable() and len(worker_id) <= _SESSION_NAME_BYTES:
        return worker_id
    return "chronoq-" + hashlib.sha256(worker_id.encode()).hexdigest()[:32]


def with_session_name(dsn: str, worker_id: str) -> str:
    """The DSN, its sessions named after the worker `worker_id` (`session_name`), so that they
    can be found once its process has died. A SQLite DSN is returned as it is: SQLite has no
    server sessions."""
    if store_kind(dsn) != "postgres":
        return dsn
    head, _, query = dsn.partition("?")
    kept = [
        part
        for part in query.split("&")
        if part and unquote(part.split("=", 1)[0]) != "application_name"
    ]
    kept.append("application_name=" + quote(session_name(worker_id), safe=""))
    return f"{head}?{'&'.join(kept)}"


def sqlite_path(dsn: str) -> str:
    """The file a `sqlite:///relative.db` or `sqlite:////absolute.db` DSN names."""
    if not dsn.lower().startswith("sqlite:///"):
        raise InvalidDSN(
            f"invalid SQLite DSN {dsn!r}: write sqlite:///relative/path.db "
            "or sqlite:////absolute/path.db"
        )
    path = dsn[len("sqlite:///") :].split("?", 1)[0]
    if not path or path == ":memory:":
        raise InvalidDSN(
            f"invalid SQLite DSN {dsn!r}: name a file; workers in other processes must share it"
        )
    return str(Path(path))


def check_postgres_dsn(dsn: str) -> None:
    """Reject a malformed PostgreSQL URL early, naming the problem but never the password."""
    if not dsn.isascii():
        try:
            dsn.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate: bytes a command line could not decode. The error would quote it.
            raise InvalidDSN(f"malformed PostgreSQL DSN {redact(dsn)!r}: not UTF-8 text") from None
    try:
        parts = urlsplit(dsn)
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError as exc:
        raise InvalidDSN(f"malformed PostgreSQL DSN {redact(dsn)!r}: {exc}") from None
    if not (parts.hostname or parts.path.strip("/") or "host=" in parts.query):
        raise InvalidDSN(f"malformed PostgreSQL DSN {redact(dsn)!r}: no host or database")
    _check_single_at(dsn)


def _check_single_at(dsn: str) -> None:
    """Refuse a URL whose user or password holds an unescaped `@`.

    libpq ends the user info at the first `@` and Python's `urlsplit` at the last, so such a URL
    means different things to each, and libpq takes the rest of the password for a host name and
    prints it in its error. Guessing which `@` the user meant would be wrong whenever a host
    part holds one too; percent-encoding is the one spelling every reader agrees on.
    """
    if not _URL.match(dsn):
        return
    scheme, rest = dsn.split("://", 1)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if authority.count("@") > 1:
        # Which part is the user and which the password is unknown here: hide both.
        shown = redact(f"{scheme}://***@{rest[authority.rfind('@') + 1 :]}")
        raise InvalidDSN(
            f"malformed PostgreSQL DSN {shown!r}: the user or password holds an `@`; "
            "write it percent-encoded, as %40"
        )
