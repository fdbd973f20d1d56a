"""One validated, frozen configuration: explicit arguments > CHRONOQ_* environment > defaults."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from chronoq.errors import ConfigError
from chronoq.storage.dsn import DEFAULT_DSN, store_kind

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Config:
    """Settings shared by the app, the worker, the CLI and the HTTP server."""

    dsn: str = DEFAULT_DSN
    payload_limit: int = MIB
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
        return self

    def with_dsn(self, dsn: str | None) -> Config:
        return self if not dsn else replace(self, dsn=dsn).validated()


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
