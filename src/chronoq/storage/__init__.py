"""Storage adapters behind one port (`JobStore`), chosen by the DSN's scheme."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chronoq.storage.base import JobStore
from chronoq.storage.dsn import store_kind

if TYPE_CHECKING:
    from chronoq.config import Config

__all__ = ["JobStore", "open_store"]


def open_store(config: Config, *, migrate_sqlite: bool = True) -> JobStore:
    """Open the store the DSN names. SQLite migrates itself; PostgreSQL needs `chronoq migrate`."""
    kind = store_kind(config.dsn)
    if kind == "sqlite":
        from chronoq.storage.sqlite.store import SqliteStore

        return SqliteStore(config.dsn, migrate=migrate_sqlite)
    from chronoq.storage.postgres.store import PostgresStore

    return PostgresStore(
        config.dsn, pool_size=config.pool_size, connect_timeout=config.connect_timeout
    )
