"""What every PostgreSQL connection of chronoq shares: its queries and session setup."""

from __future__ import annotations

from typing import Any

import psycopg

from chronoq.storage.sqlfile import load_dialect

Q = load_dialect("chronoq.storage.postgres")


def configure_session(conn: psycopg.Connection[Any]) -> None:
    conn.execute(Q["session_setup"])


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
