"""Migrations: applied in order they produce exactly `schema.sql`, twice they change nothing, and
their down files undo them.

Each PostgreSQL test works in fresh databases of its own (created and dropped here), because it
builds and tears down the schema that the shared test database relies on.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chronoq.errors import ConfigError, StoreUnavailable
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore
from tests.integration.cli_support import run_cli

BOOKKEEPING = "chronoq_migrations"  # created by migrate() itself, not by a migration

# One row per object that makes up the schema, each as (kind, name, definition...). Only objects
# named chronoq_* in the public schema count; the bookkeeping table is compared separately.
CATALOG_QUERIES: dict[str, str] = {
    "relation": """
        SELECT c.relname, c.relkind::text, c.relpersistence::text,
               coalesce(array_to_string(c.reloptions, ','), '')
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname LIKE 'chronoq%%'
    """,
    "column": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               a.attidentity::text, a.attgenerated::text,
               coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
               coalesce(co.collname, '')
        FROM pg_attribute AS a
        JOIN pg_class AS c ON c.oid = a.attrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        LEFT JOIN pg_collation AS co ON co.oid = a.attcollation AND co.collname <> 'default'
        WHERE n.nspname = 'public' AND c.relname LIKE 'chronoq%%' AND c.relkind IN ('r', 'v', 'p')
          AND a.attnum > 0 AND NOT a.attisdropped
    """,
    "index": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename LIKE 'chronoq%%'
    """,
    "constraint": """
        SELECT c.relname, k.conname, k.contype::text, pg_get_constraintdef(k.oid)
        FROM pg_constraint AS k JOIN pg_class AS c ON c.oid = k.conrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname LIKE 'chronoq%%'
    """,
    "trigger": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled::text
        FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE NOT t.tgisinternal AND n.nspname = 'public' AND c.relname LIKE 'chronoq%%'
    """,
    "function": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
        FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.proname LIKE 'chronoq%%'
    """,
    "sequence": """
        SELECT c.relname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin,
               s.seqmax, s.seqcache, s.seqcycle
        FROM pg_sequence AS s JOIN pg_class AS c ON c.oid = s.seqrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname LIKE 'chronoq%%'
    """,
    "type": """
        SELECT t.typname, t.typtype::text FROM pg_type AS t
        JOIN pg_namespace AS n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typname LIKE 'chronoq%%' AND t.typtype IN ('e', 'd', 'c')
          AND NOT EXISTS (SELECT 1 FROM pg_class AS c WHERE c.reltype = t.oid)
    """,
    "comment": """
        SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), '')
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname LIKE 'chronoq%%'
    """,
}


def _catalog(dsn: str, *, with_bookkeeping: bool = False) -> dict[str, list[tuple[Any, ...]]]:
    """The schema as the catalogs describe it, in a form two databases can be compared in."""
    described: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(dsn) as conn:
        for kind, query in CATALOG_QUERIES.items():
            rows = conn.execute(query).fetchall()
            described[kind] = sorted(
                row for row in rows if with_bookkeeping or not str(row[0]).startswith(BOOKKEEPING)
            )
    return described


def _sql_file(name: str) -> str:
    return resources.files("chronoq.storage.postgres").joinpath(name).read_text("utf-8")


def _down_files(package: str) -> list[tuple[str, str]]:
    """(name, down SQL) of every migration, newest first: the order to undo them in."""
    folder = resources.files(package).joinpath("migrations")
    names = sorted((p.name for p in folder.iterdir() if p.name.endswith(".down.sql")), reverse=True)
    return [
        (name.removesuffix(".down.sql"), folder.joinpath(name).read_text("utf-8")) for name in names
    ]


def _up_names(package: str) -> list[str]:
    folder = resources.files(package).joinpath("migrations")
    return sorted(
        p.name.removesuffix(".up.sql") for p in folder.iterdir() if p.name.endswith(".up.sql")
    )


def _migrate(dsn: str) -> list[str]:
    store = PostgresStore(dsn, pool_size=1)
    try:
        return store.migrate()
    finally:
        store.close()


# -- PostgreSQL -----------------------------------------------------------------------------


def test_every_migration_has_a_down_file() -> None:
    package = "chronoq.storage.postgres"
    assert sorted(name for name, _ in _down_files(package)) == _up_names(package)
    package = "chronoq.storage.sqlite"
    assert sorted(name for name, _ in _down_files(package)) == _up_names(package)


@pytest.mark.postgres
def test_migrations_produce_schema_sql(new_database: Callable[[], str]) -> None:
    migrated, from_schema = new_database(), new_database()
    assert _migrate(migrated) == _up_names("chronoq.storage.postgres")
    with psycopg.connect(from_schema, autocommit=True) as conn:
        conn.execute(_sql_file("schema.sql"))

    expected = _catalog(migrated)
    assert expected["relation"], "the migrations created nothing"
    assert expected["function"]
    assert expected["trigger"]
    assert expected["index"]
    actual = _catalog(from_schema)
    for kind in CATALOG_QUERIES:
        assert actual[kind] == expected[kind], f"schema.sql and the migrations differ in {kind}s"


@pytest.mark.postgres
def test_the_jobs_table_is_vacuumed_after_a_fixed_number_of_dead_rows_indexes_included(
    new_database: Callable[[], str],
) -> None:
    dsn = new_database()
    _migrate(dsn)
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'chronoq_jobs'::regclass"
        ).fetchone()
    assert row is not None
    assert set(row[0]) == {
        "autovacuum_vacuum_scale_factor=0",
        "autovacuum_vacuum_threshold=50000",
        "vacuum_index_cleanup=on",
    }


@pytest.mark.postgres
def test_migrate_twice_changes_nothing(new_database: Callable[[], str]) -> None:
    dsn = new_database()
    assert _migrate(dsn) == _up_names("chronoq.storage.postgres")
    first = _catalog(dsn, with_bookkeeping=True)
    assert _migrate(dsn) == []
    assert _catalog(dsn, with_bookkeeping=True) == first
    with psycopg.connect(dsn) as conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM chronoq_migrations")]
    assert sorted(applied) == _up_names("chronoq.storage.postgres")


@pytest.mark.postgres
def test_concurrent_migrations_apply_once(new_database: Callable[[], str]) -> None:
    """Two `chronoq migrate` runs at once: the advisory lock lets one apply, the other sees it."""
    dsn = new_database()
    stores = [PostgresStore(dsn, pool_size=1), PostgresStore(dsn, pool_size=1)]
    results: list[list[str]] = []
    runners = [threading.Thread(target=lambda s=s: results.append(s.migrate())) for s in stores]
    try:
        with psycopg.connect(dsn) as blocker:
            # Hold the migrations lock while both runs start, so they queue up on it together.
            blocker.execute("SELECT pg_advisory_xact_lock(hashtext('chronoq_migrations'))")
            for runner in runners:
                runner.start()
            blocker.commit()
        for runner in runners:
            runner.join(30)
            assert not runner.is_alive()
    finally:
        for store in stores:
            store.close()
    assert sorted(results, key=len) == [[], _up_names("chronoq.storage.postgres")]


@pytest.mark.postgres
def test_down_migrations_leave_no_chronoq_objects(new_database: Callable[[], str]) -> None:
    dsn = new_database()
    _migrate(dsn)
    before = _catalog(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, down in _down_files("chronoq.storage.postgres"):
            conn.execute(down)
            conn.execute("DELETE FROM chronoq_migrations WHERE name = %s", [name])
    left = _catalog(dsn)
    assert {kind: rows for kind, rows in left.items() if rows} == {}
    # The bookkeeping table outlives the migrations; with its rows gone they apply afresh.
    assert _migrate(dsn) == _up_names("chronoq.storage.postgres")
    assert _catalog(dsn) == before


@pytest.mark.postgres
@pytest.mark.parametrize("version", _up_names("chronoq.storage.postgres")[:-1])
def test_migrate_down_to_a_version_then_up_again_gives_the_same_schema(
    new_database: Callable[[], str], version: str
) -> None:
    dsn, reference = new_database(), new_database()
    _migrate(dsn)
    before = _catalog(dsn)
    names = _up_names("chronoq.storage.postgres")
    newer = names[names.index(version) + 1 :]
    down = run_cli("migrate", "--dsn", dsn, "--to", version, "--json")
    assert (down.code, down.json()) == (0, {"applied": [], "reverted": newer[::-1]})
    # The schema is the one that version's migrations build, bookkeeping included.
    up_to = run_cli("migrate", "--dsn", reference, "--to", version.split("_")[0], "--json")
    assert up_to.json() == {"applied": names[: names.index(version) + 1], "reverted": []}
    assert _catalog(dsn, with_bookkeeping=True) == _catalog(reference, with_bookkeeping=True)
    assert run_cli("migrate", "--dsn", dsn, "--json").json() == {"applied": newer}
    assert _catalog(dsn) == before


@pytest.mark.postgres
def test_migrate_to_an_unknown_version_is_refused_and_changes_nothing(
    new_database: Callable[[], str],
) -> None:
    dsn = new_database()
    _migrate(dsn)
    before = _catalog(dsn, with_bookkeeping=True)
    refused = run_cli("migrate", "--dsn", dsn, "--to", "0042")
    assert refused.code == 2
    assert refused.err == (
        "error: unknown migration version '0042': known versions are "
        + ", ".join(_up_names("chronoq.storage.postgres"))
        + "\n"
    )
    assert _catalog(dsn, with_bookkeeping=True) == before


# -- SQLite ---------------------------------------------------------------------------------


def _sqlite_objects(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT type, name, coalesce(sql, '') FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
    conn.close()
    return [tuple(row) for row in rows]


def _sqlite_structure(path: Path) -> dict[str, Any]:
    """Each table's columns and indexes as SQLite describes them, whatever the SQL text."""
    with sqlite3.connect(path) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'chronoq%'"
            )
        ]
        described = {
            table: (
                conn.execute("SELECT * FROM pragma_table_xinfo(?)", [table]).fetchall(),
                sorted(conn.execute("SELECT * FROM pragma_index_list(?)", [table]).fetchall()),
            )
            for table in tables
        }
    conn.close()
    return described


def _has_jobs_table(path: Path) -> bool:
    return ("table", "chronoq_jobs") in {(kind, name) for kind, name, _ in _sqlite_objects(path)}


def test_sqlite_migrate_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = SqliteStore(f"sqlite:///{path}", migrate=False)
    try:
        assert not _has_jobs_table(path)
        assert store.migrate() == _up_names("chronoq.storage.sqlite")
        first = _sqlite_objects(path)
        assert store.migrate() == []
        assert _has_jobs_table(path)
    finally:
        store.close()
    reopened = SqliteStore(f"sqlite:///{path}")  # migrates on open: nothing left to do
    reopened.close()
    assert _sqlite_objects(path) == first


@pytest.mark.parametrize("round_", range(10))
def test_sqlite_stores_opened_at_once_on_a_new_file_migrate_it_once(
    tmp_path: Path, round_: int
) -> None:
    """Workers starting together on a new file: each switches it to WAL and migrates; none fails.

    The race is narrow, hence several rounds, each on a new file.
    """
    dsn = f"sqlite:///{tmp_path / f'jobs{round_}.db'}"
    count = 8
    start = threading.Barrier(count, timeout=30)
    opened: list[SqliteStore] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        start.wait()
        try:
            opened.append(SqliteStore(dsn))
        except BaseException as exc:
            errors.append(exc)

    openers = [threading.Thread(target=open_store) for _ in range(count)]
    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join(60)
        assert not opener.is_alive()
    for store in opened:
        assert store.migrate() == []
        store.close()
    assert errors == []
    assert len(opened) == count


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, " * 100)
    with pytest.raises(StoreUnavailable, match="not a database"):
        SqliteStore(f"sqlite:///{path}")


def test_sqlite_down_migrations_leave_no_chronoq_objects(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    SqliteStore(f"sqlite:///{path}").close()
    before = _sqlite_objects(path)
    with sqlite3.connect(path) as conn:
        for name, down in _down_files("chronoq.storage.sqlite"):
            conn.executescript(down)
            conn.execute("DELETE FROM chronoq_migrations WHERE name = ?", [name])
    conn.close()
    left = [obj for obj in _sqlite_objects(path) if obj[1] != BOOKKEEPING]
    assert left == []
    store = SqliteStore(f"sqlite:///{path}", migrate=False)
    try:
        assert store.migrate() == _up_names("chronoq.storage.sqlite")
    finally:
        store.close()
    assert _sqlite_objects(path) == before


@pytest.mark.parametrize("version", _up_names("chronoq.storage.sqlite")[:-1])
def test_sqlite_migrate_down_to_a_version_then_up_again_gives_the_same_schema(
    tmp_path: Path, version: str
) -> None:
    path, reference = tmp_path / "jobs.db", tmp_path / "reference.db"
    SqliteStore(f"sqlite:///{path}").close()
    before = _sqlite_objects(path)
    names = _up_names("chronoq.storage.sqlite")
    newer = names[names.index(version) + 1 :]
    down = run_cli("migrate", "--dsn", f"sqlite:///{path}", "--to", version, "--json")
    assert (down.code, down.json()) == (0, {"applied": [], "reverted": newer[::-1]})
    run_cli("migrate", "--dsn", f"sqlite:///{reference}", "--to", version)
    # The down file rebuilds a table SQLite then names in quotes: compare what the tables hold.
    assert _sqlite_structure(path) == _sqlite_structure(reference)
    assert run_cli("migrate", "--dsn", f"sqlite:///{path}", "--json").json() == {"applied": newer}
    assert _sqlite_objects(path) == before


def test_sqlite_migrate_to_an_unknown_version_is_refused(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'jobs.db'}"
    SqliteStore(dsn).close()
    refused = run_cli("migrate", "--dsn", dsn, "--to", "latest")
    assert refused.code == 2
    assert refused.err.startswith("error: unknown migration version 'latest': known versions are")
    assert refused.err.count("\n") == 1
    assert run_cli("migrate", "--dsn", dsn, "--json").json() == {"applied": []}


def test_an_unknown_version_is_refused_before_the_database_is_touched(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'jobs.db'}", migrate=False)
    try:
        with pytest.raises(ConfigError, match="unknown migration version '0'"):
            store.migrate_to("0")
        assert not _has_jobs_table(tmp_path / "jobs.db")
    finally:
        store.close()


def test_a_postgresql_only_migration_is_not_a_sqlite_version(tmp_path: Path) -> None:
    """0006 (enqueue from SQL) exists for PostgreSQL alone: SQLite's list skips it, a SQLite
    database is up to date without it, and asking SQLite for it names the versions it has."""
    assert "0006_enqueue_function" in _up_names("chronoq.storage.postgres")
    assert "0006_enqueue_function" not in _up_names("chronoq.storage.sqlite")
    dsn = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert run_cli("migrate", "--dsn", dsn, "--json").json() == {
        "applied": _up_names("chronoq.storage.sqlite")
    }
    refused = run_cli("migrate", "--dsn", dsn, "--to", "0006")
    assert refused.code == 2
    assert refused.err == (
        "error: unknown migration version '0006': known versions are "
        + ", ".join(_up_names("chronoq.storage.sqlite"))
        + "\n"
    )
