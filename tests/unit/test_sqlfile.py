"""Named SQL blocks: one file per table, names unique across a dialect's files."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from importlib import resources
from pathlib import Path

import pytest

from chronoq.storage import sql, sqlstore
from chronoq.storage.sqlfile import DIALECT_FILES, load_dialect, load_queries

DIALECTS = ["chronoq.storage.postgres", "chronoq.storage.sqlite"]
# The shared store: SqlStore and the parts it is composed of.
SHARED = [
    sqlstore,
    *(
        importlib.import_module(f"{sql.__name__}.{m.name}")
        for m in pkgutil.iter_modules(sql.__path__)
    ),
]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package of our own to write `.sql` files into."""
    folder = tmp_path / "sqlfile_probe"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    # Each test's package is a new folder: forget the one an earlier test imported.
    monkeypatch.delitem(sys.modules, "sqlfile_probe", raising=False)
    return folder


def test_blocks_are_read_by_name_across_files(package: Path) -> None:
    (package / "a.sql").write_text(
        "-- heading\n\n-- name: one\nSELECT 1\n\n-- name: two\nSELECT 2\n"
    )
    (package / "b.sql").write_text("-- name: three\nSELECT 3\n")
    assert load_queries("sqlfile_probe", "a.sql", "b.sql") == {
        "one": "SELECT 1",
        "two": "SELECT 2",
        "three": "SELECT 3",
    }


def test_a_name_defined_twice_in_one_file_is_refused(package: Path) -> None:
    (package / "a.sql").write_text("-- name: one\nSELECT 1\n-- name: one\nSELECT 2\n")
    with pytest.raises(ValueError, match=r"a\.sql: query 'one' is defined twice$"):
        load_queries("sqlfile_probe", "a.sql")


def test_a_name_defined_in_two_files_is_refused_naming_both(package: Path) -> None:
    (package / "a.sql").write_text("-- name: one\nSELECT 1\n")
    (package / "b.sql").write_text("-- name: one\nSELECT 2\n")
    with pytest.raises(
        ValueError, match=r"b\.sql: query 'one' is defined twice \(first in a\.sql\)"
    ):
        load_queries("sqlfile_probe", "a.sql", "b.sql")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_sql_file_of_a_dialect_is_loaded(dialect: str) -> None:
    """A file left out of DIALECT_FILES would ship and never be read."""
    shipped = {p.name for p in resources.files(dialect).iterdir() if p.name.endswith(".sql")}
    assert shipped == {*DIALECT_FILES, *(["schema.sql"] if "postgres" in dialect else [])}
    assert load_dialect(dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_block_the_shared_store_runs_exists_in_both_dialects(dialect: str) -> None:
    used = {
        name
        for module in SHARED
        for name in re.findall(r'self\.Q\["(\w+)"\]', inspect.getsource(module))
    }
    assert used, "the pattern no longer finds the shared store's statements"
    assert used <= set(load_dialect(dialect))


def test_whole_line_comments_are_not_sent_and_the_rest_is_kept(package: Path) -> None:
    (package / "a.sql").write_text(
        "-- name: one\n"
        "-- why this query is written so\n"
        "SELECT 1 AS a, -- the first\n"
        "    '--not a comment' AS b\n"
        "  -- an indented note\n"
        "FROM t\n"
        "-- a last note"
    )
    assert load_queries("sqlfile_probe", "a.sql") == {
        "one": "SELECT 1 AS a, -- the first\n    '--not a comment' AS b\nFROM t"
    }


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_query_is_short_enough_for_psycopgs_parse_cache(dialect: str) -> None:
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    long = {
        name: len(query.encode())
        for name, query in load_dialect(dialect).items()
        if len(query.encode()) > MAX_CACHED_STATEMENT_LENGTH
    }
    assert not long, f"parsed again at every execution: {long}"
