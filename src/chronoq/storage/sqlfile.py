"""Named SQL blocks loaded from `.sql` files shipped in the package.

A file holds blocks headed by `-- name: NAME`; the text up to the next header is the query. SQL
stays in `.sql` files so it can be read, linted and diffed as SQL, never built with f-strings.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString, cast

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str) -> dict[str, LiteralString]:
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{filename}: query {name!r} is defined twice")
        queries[name] = cast(LiteralString, body).strip()
    return queries


def load_migrations(package: str) -> list[tuple[str, LiteralString]]:
    """(name, up SQL) of every `NNNN_name.up.sql` in the package's migrations folder, in order."""
    folder = resources.files(package).joinpath("migrations")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".up.sql"))
    return [
        (
            name.removesuffix(".up.sql"),
            folder.joinpath(name).read_text("utf-8"),
        )
        for name in names
    ]
