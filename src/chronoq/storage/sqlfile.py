"""Named SQL blocks loaded from `.sql` files shipped in the package.

A file holds blocks headed by `-- name: NAME`; the text up to the next header is the query. SQL
stays in `.sql` files so it can be read, linted and diffed as SQL, never built with f-strings.

Each dialect keeps its statements in one file per table (`DIALECT_FILES`), as River's `dbsqlc/`
does; a block name is unique across all of a dialect's files, so the stores look statements up
by name alone and a block moved between files needs no change in Python.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
# Whole-line comments are for whoever reads the file, and are not sent: psycopg parses a query
# for its placeholders once and keeps the result only for queries of at most 4 KiB, so a long
# commented query (the claim) was parsed again at every execution.
_COMMENT_LINE = re.compile(r"^[ \t]*--.*(?:\n|\Z)", re.MULTILINE)

# session: connection set-up, migrations bookkeeping, the clock; jobs: chronoq_jobs; queues:
# queues, key limits and their buckets; schedules: chronoq_schedules; leaders: leadership;
# tier: chronoq_tier, the partition count of tiered dispatch; processes: the fleet registry.
DIALECT_FILES = (
    "session.sql",
    "jobs.sql",
    "queues.sql",
    "schedules.sql",
    "leaders.sql",
    "tier.sql",
    "processes.sql",
)


def load_queries(package: str, *filenames: str) -> dict[str, LiteralString]:
    """The blocks of `filenames`, read from `package`; a name defined twice, in one file or in
    two, is refused."""
    queries: dict[str, LiteralString] = {}
    where: dict[str, str] = {}
    for filename in filenames:
        text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        parts = _HEADER.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                first = where[name]
                also = "" if first == filename else f" (first in {first})"
                raise ValueError(f"{filename}: query {name!r} is defined twice{also}")
            queries[name] = _COMMENT_LINE.sub("", body).strip()
            where[name] = filename
    return queries


def load_dialect(package: str) -> dict[str, LiteralString]:
    """Every statement of one dialect (`chronoq.storage.postgres` or `...sqlite`)."""
    return load_queries(package, *DIALECT_FILES)


def _migration_files(package: str, suffix: str) -> list[tuple[str, LiteralString]]:
    folder = resources.files(package).joinpath("migrations")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(suffix))
    return [(name.removesuffix(suffix), folder.joinpath(name).read_text("utf-8")) for name in names]


def load_migrations(package: str) -> list[tuple[str, LiteralString]]:
    """(name, up SQL) of every `NNNN_name.up.sql` in the package's migrations folder, in order."""
    return _migration_files(package, ".up.sql")


def load_down_migrations(package: str) -> dict[str, LiteralString]:
    """Down SQL of every `NNNN_name.down.sql` in the package's migrations folder, by name."""
    return dict(_migration_files(package, ".down.sql"))
