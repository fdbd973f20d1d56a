"""Bearer tokens and their scopes, shared by the HTTP API and the dashboard.

Tokens come from configuration (`admin_tokens`, `read_tokens`: comma-separated; environment
`CHRONOQ_ADMIN_TOKENS`, `CHRONOQ_READ_TOKENS`). An admin token may do everything; a read token
may only look. With no token configured the server is open, and `chronoq serve` then refuses
to bind anywhere but loopback.
"""

from __future__ import annotations

import enum
import hmac
from dataclasses import dataclass

from chronoq.config import Config
from chronoq.errors import ConfigError

MIN_TOKEN_LENGTH = 16


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
