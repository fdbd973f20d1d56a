"""Fixtures for real stores: a SQLite file per test and a PostgreSQL database per test run.

The etcd cluster (`etcd_cluster`, `etcd_prefix`) comes from tests/services/etcd.py, the etcd
member with TLS and authentication (`secure_etcd`, `secure_prefix`) from etcd_secure.py there.

PostgreSQL comes from CHRONOQ_TEST_PG_DSN (default: the local server with trust auth). Without a
reachable server, PostgreSQL tests skip locally with the reason, and fail when CI is set.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore
from tests.services.etcd import etcd_cluster, etcd_prefix  # noqa: F401 - fixtures for every test
from tests.services.etcd_secure import secure_etcd, secure_prefix  # noqa: F401
from tests.services.redis import private_redis, redis_client, redis_prefix, redis_url  # noqa: F401
from tests.services.redis_cluster import cluster_prefix, redis_cluster  # noqa: F401

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _admin_dsn() -> str:
    return os.environ.get("CHRONOQ_TEST_PG_DSN", DEFAULT_PG_DSN)


def _with_database(dsn: str, name: str) -> str:
    """The same server (a URL or a key=value conninfo) with another database name."""
    if "://" in dsn:
        return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    return psycopg.conninfo.make_conninfo(dsn, dbname=name)


def _missing_service(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _create_database(prefix: str) -> tuple[str, str]:
    """A new empty database on the test server: its name and DSN."""
    admin = _admin_dsn()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        _missing_service(f"PostgreSQL not reachable at CHRONOQ_TEST_PG_DSN: {exc}")
    return name, _with_database(admin, name)


def _drop_databases(names: list[str]) -> None:
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        for name in names:
            drop = psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(psycopg.sql.Identifier(name)))


def _printable(text: str) -> str:
    """`text` with lone surrogates (undecodable bytes that an input test sent) shown escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Reports travel from pytest-xdist's workers as UTF-8, which a lone surrogate cannot be
    written in: the hostile-input tests print and log such text, and the worker would die
    sending their report. Their captured output and failures are shown escaped instead."""
    report.sections = [(title, _printable(content)) for title, content in report.sections]
    if report.longrepr is not None:
        shown = str(report.longrepr)
        if _printable(shown) != shown:
            report.longrepr = _printable(shown)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh, migrated database for this test run; dropped at the end."""
    name, dsn = _create_database("chronoq_test")
    store = PostgresStore(dsn)
    store.migrate()
    store.close()
    yield dsn
    _drop_databases([name])


@pytest.fixture
def new_database() -> Iterator[Callable[[], str]]:
    """Creates empty PostgreSQL databases on demand (returning their DSNs) and drops them all
    afterwards: for tests that build, tear down or alter the schema the shared database keeps."""
    created: list[str] = []

    def create() -> str:
        name, dsn = _create_database("chronoq_scratch")
        created.append(name)
        return dsn

    yield create
    if created:
        _drop_databases(created)


@pytest.fixture
def pg_dsn(pg_database: str) -> str:
    """The test run's database, emptied before each test."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE chronoq_jobs, chronoq_schedules, chronoq_queues, chronoq_key_limits,"
            " chronoq_key_buckets, chronoq_leaders, chronoq_tier, chronoq_processes,"
            " chronoq_unique_keys"
            " RESTART IDENTITY"
        )
    return pg_database


@pytest.fixture
def sqlite_dsn(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'chronoq.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def dsn(request: pytest.FixtureRequest) -> str:
    """Each store in turn: tests using it run once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_dsn"))
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[PostgresStore]:
    """For what only PostgreSQL has (COPY, async connections)."""
    opened = PostgresStore(pg_dsn)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(sqlite_dsn: str) -> Iterator[SqliteStore]:
    """For what only SQLite has (several processes on one file)."""
    opened = SqliteStore(sqlite_dsn)
    yield opened
    opened.close()


@pytest.fixture
def store(dsn: str) -> Iterator[SqliteStore | PostgresStore]:
    opened: SqliteStore | PostgresStore = (
        SqliteStore(dsn) if dsn.startswith("sqlite") else PostgresStore(dsn)
    )
    yield opened
    opened.close()
