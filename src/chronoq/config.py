"""One validated, frozen configuration: explicit arguments > CHRONOQ_* environment > defaults.

Every field can be set as `CHRONOQ_<FIELD>` (`CHRONOQ_DISPATCH=tiered`) or passed to
`Config.load(...)` and `App(...)`. `validated()` checks each field on its own, naming it, then the
rules that tie fields together: tiered dispatch needs a PostgreSQL store, a Redis URL and etcd
endpoints, and one message names everything that is missing.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from chronoq.errors import ConfigError
from chronoq.storage.dsn import DEFAULT_DSN, redact, store_kind
from chronoq.storage.tier import MAX_PARTITIONS

MIB = 1024 * 1024
DEFAULT_OUTPUT_LIMIT = 64 * 1024
DISPATCH_MODES = ("db", "tiered")
# Staged jobs live in Redis (about 100 B each) and in each leader's timing wheel: an hour of
# them is already a lot; a longer horizon buys nothing a re-stage every few seconds does not.
MAX_STAGE_HORIZON = 3600.0
REDIS_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True, slots=True)
class Config:
    """Settings shared by the app, the worker, the CLI and the HTTP server."""

    dsn: str = DEFAULT_DSN
    payload_limit: int = MIB
    # The largest handler return value (as JSON, bytes) stored as a job's output; a larger one
    # fails the attempt. A worker may set its own (WorkerOptions.output_limit).
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    default_queue: str = "default"
    default_max_attempts: int = 20
    default_lease: float = 60.0
    pool_size: int = 4
    connect_timeout: float = 10.0
    # Secrets are left out of the repr, so a Config in a log line or a traceback shows none.
    # Bearer tokens of the HTTP API and dashboard, comma-separated: admin tokens may change
    # things, read tokens only look. None configured: `chronoq serve` binds to loopback only.
    admin_tokens: str = field(default="", repr=False)
    read_tokens: str = field(default="", repr=False)
    # Signs the dashboard's session cookies. Empty: a new key at each start of `chronoq serve`
    # (a restart logs everyone out); set one shared key when several servers share the users.
    session_secret: str = field(default="", repr=False)
    # How due jobs reach workers: "db", workers claim due rows from the store; "tiered", partition
    # leaders (elected through etcd) stage near-due jobs into Redis and workers confirm them in
    # PostgreSQL by id. `redis_url` may carry a password, so it stays out of the repr.
    dispatch: str = "db"
    redis_url: str = field(default="", repr=False)
    # Comma-separated http(s)://host:port; an entry may carry user:password@ (then it stays out
    # of the repr, as redis_url does).
    etcd_endpoints: str = field(default="", repr=False)
    partitions: int = 16  # fixed by the first tiered start on a database (chronoq_tier)
    leader_ttl: float = 5.0  # seconds an etcd lease outlives its leader's last keep-alive
    stage_horizon: float = 60.0  # seconds ahead of the database clock that jobs are staged
    redis_prefix: str = "chronoq"  # starts every Redis key; the partition's {hash tag} follows
    # etcd with authentication on: the user and password the electors authenticate as (or
    # user:password@ in the endpoints). With https:// endpoints: the CA that signed the members'
    # certificates (else the system's), and a client certificate and its key when the members
    # ask for one (--client-cert-auth). Paths of PEM files.
    etcd_username: str = ""
    etcd_password: str = field(default="", repr=False)
    etcd_ca_file: str = ""
    etcd_cert_file: str = ""
    etcd_key_file: str = ""

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, /, **overrides: Any) -> Config:
        """Defaults, then `CHRONOQ_<FIELD>` variables, then `overrides` (None means unset)."""
        known = {f.name for f in fields(cls)}
        for name in overrides:
            if name not in known:
                raise ConfigError(f"unknown setting {name!r}{_suggest(name, known)}")
        values: dict[str, Any] = {}
        env = os.environ if environ is None else environ
        for setting in fields(cls):
            raw = env.get(f"CHRONOQ_{setting.name.upper()}")
            if raw is not None and raw != "":
                values[setting.name] = _coerce(setting.name, setting.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values).validated()

    def validated(self) -> Config:
        for setting in fields(self):
            _check_type(setting.name, str(setting.type), getattr(self, setting.name))
        store_kind(self.dsn)
        _require(self.payload_limit > 0, "payload_limit", "must be a positive number of bytes")
        _require(self.output_limit > 0, "output_limit", "must be a positive number of bytes")
        _require(bool(self.default_queue.strip()), "default_queue", "must not be empty")
        _require(self.default_max_attempts >= 1, "default_max_attempts", "must be at least 1")
        _require(0 < self.default_lease < math.inf, "default_lease", "must be positive seconds")
        _require(self.pool_size >= 1, "pool_size", "must be at least 1")
        _require(0 < self.connect_timeout < math.inf, "connect_timeout", "must be positive seconds")
        _require(
            not self.session_secret or len(self.session_secret) >= 32,
            "session_secret",
            "must be at least 32 characters",
        )
        _check_tier_settings(self)
        _check_tiered_needs(self)
        return self

    def etcd_urls(self) -> list[str]:
        """`etcd_endpoints` as a list of URLs (empty when none is set)."""
        return (
            [url.strip() for url in self.etcd_endpoints.split(",")] if self.etcd_endpoints else []
        )

    def with_dsn(self, dsn: str | None) -> Config:
        return self if not dsn else replace(self, dsn=dsn).validated()


def _check_tier_settings(config: Config) -> None:
    """Each setting of tiered dispatch on its own (checked in db mode too: a typo in the
    environment should not wait for the day tiered mode is switched on)."""
    _check_dispatch(config.dispatch)
    _check_redis_url(config.redis_url)
    for position, url in enumerate(config.etcd_urls(), start=1):
        _check_etcd_url(position, url)
    _check_etcd_login(config)
    _check_etcd_tls(config)
    _require(
        1 <= config.partitions <= MAX_PARTITIONS,
        "partitions",
        f"must be from 1 to {MAX_PARTITIONS}, got {config.partitions}",
    )
    _require(
        1 <= config.leader_ttl < math.inf,
        "leader_ttl",
        f"must be a finite number of seconds, at least 1, got {config.leader_ttl}",
    )
    _require(
        0 < config.stage_horizon <= MAX_STAGE_HORIZON,
        "stage_horizon",
        f"must be more than 0 and at most {MAX_STAGE_HORIZON:g} seconds, "
        f"got {config.stage_horizon}",
    )
    _check_redis_prefix(config.redis_prefix)


def _check_dispatch(mode: str) -> None:
    if mode in DISPATCH_MODES:
        return
    close = difflib.get_close_matches(mode.strip().lower(), DISPATCH_MODES, n=1, cutoff=0.7)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"setting 'dispatch' must be 'db' or 'tiered', got {mode!r}{hint}")


def _check_redis_url(url: str) -> None:
    """A URL redis-py can open: redis://, rediss:// (TLS) or unix://. Its password is never
    shown back."""
    if not url:
        return
    shown = redact(url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(
            f"setting 'redis_url' must start with redis://, rediss:// or unix://, got {shown!r}"
        )
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a port that is no number from 0 to 65535
    except ValueError:
        raise ConfigError(f"setting 'redis_url' has an invalid port: {shown!r}") from None
    if scheme == "unix":
        _require(bool(parts.path), "redis_url", f"names no socket path: {shown!r}")
    else:
        _require(bool(parts.hostname), "redis_url", f"names no host: {shown!r}")
        database = parts.path.strip("/")
        _require(
            not database or database.isdigit(),
            "redis_url",
            f"may end only in a database number (/0), got {shown!r}",
        )


def _check_etcd_url(position: int, url: str) -> None:
    """One etcd client URL: http(s)://host:port, optionally with user:password@, and nothing
    else (paths and queries have no place in an endpoint). A password is never echoed."""
    where = f"setting 'etcd_endpoints': entry {position}"
    if not url:
        raise ConfigError(f"{where} is empty; separate http(s)://host:port URLs with commas")
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{where} ({shown!r}) has an invalid port") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} ({shown!r}) is not an http(s)://host:port URL")
    if (parts.username is None) != (parts.password is None) or parts.username == "":
        raise ConfigError(
            f"{where} ({shown!r}) must carry both a user and a password (user:password@host) "
            "or neither"
        )
    if port is None:
        raise ConfigError(f"{where} ({shown!r}) names no port (etcd listens on 2379)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{where} ({shown!r}) must be only scheme://host:port")


def _etcd_url_logins(config: Config) -> set[tuple[str, str]]:
    """The (user, password) pairs the endpoints carry, percent-decoded."""
    logins = set()
    for url in config.etcd_urls():
        parts = urlsplit(url)
        if parts.username is not None and parts.password is not None:
            logins.add((unquote(parts.username), unquote(parts.password)))
    return logins


def _check_etcd_login(config: Config) -> None:
    """One user and password for etcd: from the settings or from the endpoints, not two."""
    _require(
        bool(config.etcd_username) == bool(config.etcd_password),
        "etcd_password" if config.etcd_username else "etcd_username",
        "must be set too: etcd authenticates with a user name and its password "
        "(CHRONOQ_ETCD_USERNAME, CHRONOQ_ETCD_PASSWORD)",
    )
    logins = _etcd_url_logins(config)
    _require(
        len(logins) <= 1,
        "etcd_endpoints",
        "carries different users or passwords in its entries: give one login, in every entry "
        "or in etcd_username and etcd_password",
    )
    settings = (config.etcd_username, config.etcd_password)
    _require(
        not logins or not config.etcd_username or logins == {settings},
        "etcd_username",
        "and etcd_password differ from the user:password@ of etcd_endpoints: give one of them",
    )


def _check_etcd_tls(config: Config) -> None:
    """TLS files: each one readable, a certificate with its key, and only for https://."""
    names = ("etcd_ca_file", "etcd_cert_file", "etcd_key_file")
    for name in names:
        path = getattr(config, name)
        _require(not path or os.path.isfile(path), name, f"names no file: {path!r}")
        _require(
            not path or os.access(path, os.R_OK), name, f"names a file we cannot read: {path!r}"
        )
    if bool(config.etcd_cert_file) != bool(config.etcd_key_file):
        given, missing = (
            ("etcd_cert_file", "etcd_key_file")
            if config.etcd_cert_file
            else ("etcd_key_file", "etcd_cert_file")
        )
        raise ConfigError(
            f"setting {missing!r} must be set too: a client certificate needs its private key "
            f"({given} is set; CHRONOQ_{missing.upper()})"
        )
    tls = [name for name in names if getattr(config, name)]
    for position, url in enumerate(config.etcd_urls(), start=1):
        if tls and urlsplit(url).scheme.lower() != "https":
            raise ConfigError(
                f"setting {tls[0]!r} needs https:// etcd endpoints, but entry {position} of "
                f"'etcd_endpoints' is {redact(url)!r}"
            )


def _check_redis_prefix(prefix: str) -> None:
    _require(bool(prefix.strip()), "redis_prefix", "must not be empty")
    # Redis Cluster hashes only what is inside the first {...} of a key: a brace in the prefix
    # would move every partition's keys onto the prefix's slot, or split them across slots.
    _require(
        "{" not in prefix and "}" not in prefix,
        "redis_prefix",
        f"must not contain braces (they would break the Redis keys' hash tags), got {prefix!r}",
    )
    _require(
        prefix.isprintable() and not any(char.isspace() for char in prefix),
        "redis_prefix",
        f"must not contain spaces or control characters, got {prefix!r}",
    )


def _check_tiered_needs(config: Config) -> None:
    """Tiered dispatch: everything it lacks, named in one message."""
    if config.dispatch != "tiered":
        return
    problems = []
    if store_kind(config.dsn) == "sqlite":
        problems.append(f"needs PostgreSQL; the dsn is SQLite ({redact(config.dsn)})")
    missing = [
        f"{name} (CHRONOQ_{name.upper()})"
        for name in ("redis_url", "etcd_endpoints")
        if not getattr(config, name)
    ]
    if missing:
        problems.append(f"needs {' and '.join(missing)}, which {_is_are(missing)} not set")
    if problems:
        raise ConfigError("tiered dispatch " + "; it also ".join(problems))


def _is_are(items: list[str]) -> str:
    return "is" if len(items) == 1 else "are"


def _coerce(name: str, kind: Any, raw: str) -> Any:
    target = {"int": int, "float": float}.get(str(kind), str)
    try:
        return target(raw)
    except ValueError:
        raise ConfigError(
            f"CHRONOQ_{name.upper()}={raw!r} is not a valid {target.__name__}"
        ) from None


def _check_type(name: str, kind: str, value: Any) -> None:
    """Overrides arrive from code, not text: a wrong type is named instead of crashing later."""
    expected: tuple[type, ...] = {"int": (int,), "float": (int, float)}.get(kind, (str,))
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(f"setting {name!r} must be {kind}, got {value!r}")


def _require(ok: bool, name: str, why: str) -> None:
    if not ok:
        raise ConfigError(f"setting {name!r} {why}")


def _suggest(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return (
        f"; did you mean {close[0]!r}?"
        if close
        else f"; known settings: {', '.join(sorted(known))}"
    )
