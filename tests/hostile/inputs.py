"""Hostile inputs shared by the tests of this package."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hostile.support import HTML, SQL

CJK = "漢字かなカナ한글" * 75  # 600 characters, 1,800 bytes in UTF-8

# Legal as task, queue and key names alike: they must round-trip exactly.
NAMES = [
    pytest.param("it's \"quoted\" ''", id="quotes"),
    pytest.param(SQL, id="sql"),
    pytest.param("' OR '1'='1", id="sql-tautology"),
    pytest.param(HTML, id="html"),
    pytest.param("%(now)s %s $1 ? :name", id="placeholders"),
    pytest.param("100% _under_ \\back\\slash [a-z]*", id="like-and-glob"),
    pytest.param("🎉🔥👩‍👩‍👧", id="emoji"),
    pytest.param("مرحبا \u202eabc\u202c שלום", id="rtl"),
    pytest.param("e\u0301\u0301\u0301 a\u200bb \ufeff", id="combining-zero-width"),
    pytest.param("\u00e9 vs e\u0301", id="nfc-and-nfd"),
    pytest.param("  padded  ", id="spaces-around"),
    pytest.param("n" * 200, id="longest"),
    pytest.param("🎉" * 200, id="longest-4-byte"),
    pytest.param('{"a": [1]}', id="json-text"),
    pytest.param("../../etc/passwd", id="path"),
]

# Refused as task or queue names.
BAD_NAMES = [
    pytest.param("", "non-empty", id="empty"),
    pytest.param("   ", "non-empty", id="whitespace"),
    pytest.param("\t\n", "non-empty", id="whitespace-controls"),
    pytest.param("a\x00b", "control characters", id="nul"),
    pytest.param("line\nbreak", "control characters", id="newline"),
    pytest.param("bell\x07", "control characters", id="control"),
    pytest.param("del\x7f", "control characters", id="delete"),
    pytest.param("n" * 201, "201 characters long; the limit is 200", id="201-chars"),
    pytest.param("n" * 10_000, "10000 characters long", id="10k-chars"),
    pytest.param("n" * 1_000_000, "1000000 characters long", id="1M-chars"),
    pytest.param("bad \udcff byte", "not valid UTF-8", id="lone-surrogate"),
    pytest.param(False, "non-empty string", id="bool"),
    pytest.param(b"bytes", "non-empty string", id="bytes"),
    pytest.param(42, "non-empty string", id="int"),
]

# Legal as keys (job and rate keys), though not as names.
KEYS = [
    pytest.param("multi\nline\tkey", id="controls"),
    pytest.param("k" * 1000, id="longest-ascii"),
    pytest.param(CJK, id="1800-bytes"),
    pytest.param(" ", id="one-space"),
]

BAD_KEYS = [
    pytest.param("", "non-empty", id="empty"),
    pytest.param("a\x00b", "NUL", id="nul"),
    pytest.param("k" * 1001, "1001 characters long", id="1001-chars"),
    pytest.param("k" * (1 << 20), "1048576 characters long", id="1MB"),
    pytest.param(CJK + "é", "1802 bytes long in UTF-8; the limit is 1800", id="1802-bytes"),
    pytest.param("\ud800", "not valid UTF-8", id="lone-surrogate"),
    pytest.param(42, "non-empty string", id="int"),
    pytest.param(b"key", "non-empty string", id="bytes"),
]


def deep(levels: int) -> dict[str, Any]:
    """A payload whose objects and arrays nest `levels` deep, the payload itself included."""
    value: Any = []
    for _ in range(levels - 2):
        value = [value]
    return {"a": value}


# Strings that would widen a filter if they reached the SQL as text instead of as a value.
INJECTIONS = [
    pytest.param("' OR '1'='1", id="tautology"),
    pytest.param("seed-dead' --", id="comment"),
    pytest.param("seed-dead'; DELETE FROM chronoq_jobs; --", id="stacked"),
    pytest.param("%", id="like-any"),
    pytest.param("*", id="glob-any"),
    pytest.param('"seed-dead"', id="double-quoted"),
    pytest.param("SEED-DEAD", id="other-case"),
    pytest.param(" seed-dead", id="leading-space"),
]
