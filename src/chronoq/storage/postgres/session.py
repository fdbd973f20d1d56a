"""What every PostgreSQL connection of chronoq shares: its queries and session setup."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.types.json import set_json_loads

from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.postgres")
# Most jobs carry an empty payload or error history, and every claimed row has both: those two
# spellings skip `json.loads` (which on bytes first guesses their encoding); the rest go through
# it.
_EMPTY_JSON: dict[str | bytes, type[dict[Any, Any]] | type[list[Any]]] = {b"{}": dict, b"[]": list}


def load_json(data: str | bytes) -> Any:
    empty = _EMPTY_JSON.get(data)
    if empty is not None:
        return empty()
    return json.loads(data)


def configure_session(conn: psycopg.Connection[Any]) -> None:
    set_json_loads(load_json, conn)
    conn.execute(Q["session_setup"])


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
