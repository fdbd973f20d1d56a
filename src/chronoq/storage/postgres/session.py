"""What every PostgreSQL connection of chronoq shares: its queries and session setup."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Self, cast

import psycopg
from psycopg.abc import Buffer, Params, Query, QueryNoTemplate
from psycopg.adapt import Loader
from psycopg.pq import Format, TransactionStatus
from psycopg.rows import Row
from psycopg.types.json import set_json_loads

from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.postgres")
# Most jobs carry an empty payload or error history, and every claimed row has both: those two
# spellings skip `json.loads` (which on bytes first guesses their encoding); the rest go through
# it.
_EMPTY_JSON: dict[str | bytes, type[dict[Any, Any]] | type[list[Any]]] = {b"{}": dict, b"[]": list}


# jsonb in binary is a version byte, then the JSON text.
_JSONB_VERSION = 1
_EMPTY_JSONB = (b"\x01{}", b"\x01[]")


def load_json(data: str | bytes) -> Any:
    empty = _EMPTY_JSON.get(data)
    if empty is not None:
        return empty()
    return json.loads(data)


class JsonbBinaryLoader(Loader):
    """jsonb columns sent in binary (the claim's): one call per value, where psycopg's own
    loader calls `load_json` from its own `load` and copies the text first. Empty objects and
    arrays, which most claimed jobs carry, cost about a quarter as much (0.2 against 0.8 us)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        if len(data) == 3:
            if data == _EMPTY_JSONB[0]:
                return {}
            if data == _EMPTY_JSONB[1]:
                return []
        if data[0] != _JSONB_VERSION:
            raise psycopg.DataError(f"unknown jsonb binary format: {data[0]}")
        return json.loads(str(data[1:], "utf-8"))


class ReplanningCursor(psycopg.Cursor[Row]):
    """The cursor of chronoq's connections: a statement that fails because the schema changed
    under its prepared form is prepared again and sent once more.

    psycopg prepares a statement after a few executions, and PostgreSQL refuses a prepared
    statement whose result columns changed ("cached plan must not change result type"): after a
    migration adds a column to a table a statement reads with `*` (the claim returns
    `chronoq_jobs` rows), every pooled connection that prepared it fails it for good, and a
    worker running through a deploy stopped at its next claim. Outside a transaction the
    failed statement did nothing, so this drops the connection's prepared statements and
    sends it again; inside one, the transaction is lost and the error stands (the rollback
    that follows drops the prepared statements: the next call works)."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        # chronoq's statements are text from its .sql files, never template strings.
        text = cast(QueryNoTemplate, query)
        try:
            return super().execute(text, params, prepare=prepare, binary=binary)
        except psycopg.errors.FeatureNotSupported as exc:
            if not (stale_plan(exc) and _outside_transaction(self.connection)):
                raise
        # psycopg forgets its prepared statements when it sees this command succeed.
        self.connection.execute(b"DEALLOCATE ALL")
        return super().execute(text, params, prepare=prepare, binary=binary)


def stale_plan(exc: psycopg.Error) -> bool:
    """The error PostgreSQL raises for a prepared statement whose result columns changed (told
    by the function raising it: the message may be translated)."""
    return exc.diag.source_function == "RevalidateCachedQuery"


def _outside_transaction(conn: psycopg.Connection[Any]) -> bool:
    return conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


def configure_session(conn: psycopg.Connection[Any]) -> None:
    """Every chronoq connection's set-up: its cursors, JSON loaders and session settings."""
    conn.cursor_factory = ReplanningCursor
    set_json_loads(load_json, conn)
    conn.adapters.register_loader("jsonb", JsonbBinaryLoader)
    conn.execute(Q["session_setup"])


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def end_sessions(
    conn: Callable[[], AbstractContextManager[psycopg.Connection[Any]]], name: str, timeout: float
) -> int:
    """End the server sessions whose `application_name` is `name` and wait, at most `timeout`
    seconds, until none is listed; how many were still listed then (0: none is left)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        with conn() as opened:
            listed = len(opened.execute(Q["sessions_end"], {"name": name}).fetchall())
        if not listed or time.monotonic() >= deadline:
            return listed
        # A backend exits within milliseconds of being ended; nothing announces it.
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.1)
