"""jsonb read in binary (the claim's format) decodes as it does in text, on a real server."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from chronoq.storage.postgres.session import JsonbBinaryLoader, configure_session

VALUES: list[Any] = [
    {},
    [],
    {"to": "a@example.com", "n": 5},
    [{"attempt": 1, "error": "ValueError", "message": "naïve — “quoted” 🙂"}],
    {"nested": {"list": [1, 2.5, None, True]}, "": ""},
    "a string",
    0,
    None,
]


@pytest.mark.parametrize("value", VALUES, ids=[json.dumps(v)[:20] for v in VALUES])
def test_binary_jsonb_reads_as_text_jsonb_does(pg_dsn: str, value: Any) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        configure_session(conn)
        text = json.dumps(value)
        query = "SELECT %s::jsonb"
        in_binary = conn.execute(query, (text,), binary=True).fetchone()
        in_text = conn.execute(query, (text,)).fetchone()
    assert in_binary is not None and in_text is not None
    assert in_binary[0] == in_text[0] == value


def test_an_unknown_jsonb_version_is_refused_by_name() -> None:
    loader = JsonbBinaryLoader(0)
    with pytest.raises(psycopg.DataError, match="unknown jsonb binary format: 2"):
        loader.load(memoryview(b"\x02{}"))
    assert loader.load(memoryview(b"\x01{}")) == {}
    assert loader.load(memoryview(b"\x01[]")) == []
