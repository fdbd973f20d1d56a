"""Fixtures of the hostile-input tests: an arena per test, on each store in turn.

The arena's rows are stored once per run through the API (`support.seed`), then put back
before each test: SQLite by copying the seeded file, PostgreSQL by emptying the tables and
copying the rows back from temporary tables, in one round trip. Both cost about a millisecond,
where seeding through the API costs ten times as much, for each of several hundred tests.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from chronoq import App
from chronoq.storage.postgres.store import PostgresStore
from tests.hostile.support import Arena, Seeds, seeded

# The tables a test can write to, and those of them the seeds fill.
_TABLES = (
    "chronoq_jobs",
    "chronoq_schedules",
    "chronoq_queues",
    "chronoq_key_limits",
    "chronoq_key_buckets",
    "chronoq_leaders",
    "chronoq_processes",
)
_SEEDED = (
    "chronoq_jobs",
    "chronoq_schedules",
    "chronoq_queues",
    "chronoq_key_limits",
    "chronoq_processes",
)

Connection = psycopg.Connection[tuple[object, ...]]


def _seed_copy(table: str) -> sql.Identifier:
    return sql.Identifier(f"hostile_seed_{table}")


@pytest.fixture(scope="session")
def pg_fast(pg_database: str) -> str:
    """The run's database, on connections that do not wait for each commit to reach the disk:
    a test here makes a dozen small commits, and nothing needs them to survive a crash."""
    return f"{pg_database}?options=-c%20synchronous_commit%3Doff"


@pytest.fixture(scope="session")
def pg_janitor(pg_fast: str) -> Iterator[Connection]:
    """A connection of its own, which holds the seeds in temporary tables for the run."""
    with psycopg.connect(pg_fast, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def pg_seeds(pg_fast: str, pg_janitor: Connection) -> Seeds:
    pg_janitor.execute(_restore_script(seeded_tables=()))
    seeds = seeded(pg_fast)
    for table in _SEEDED:
        pg_janitor.execute(
            sql.SQL("CREATE TEMPORARY TABLE {} AS TABLE {}").format(
                _seed_copy(table), sql.Identifier(table)
            )
        )
    return seeds


def _restore_script(
    seeded_tables: tuple[str, ...] = _SEEDED, job_ids: tuple[int, bool] | None = None
) -> sql.Composed:
    """Empty every table, copy the seeds back, and with `job_ids` (last_value, is_called) set
    the jobs' id sequence there."""
    statements = [sql.SQL("DELETE FROM {}").format(sql.Identifier(t)) for t in _TABLES]
    statements += [
        sql.SQL("INSERT INTO {} SELECT * FROM {}").format(sql.Identifier(t), _seed_copy(t))
        for t in seeded_tables
    ]
    if job_ids is not None:
        statements.append(
            sql.SQL("SELECT setval(pg_get_serial_sequence('chronoq_jobs', 'id'), {}, {})").format(
                sql.Literal(job_ids[0]), sql.Literal(job_ids[1])
            )
        )
    return sql.SQL("; ").join(statements)


@pytest.fixture(scope="session")
def pg_restore(pg_janitor: Connection, pg_seeds: Seeds) -> sql.Composed:
    """What puts the seeds back, the jobs' id sequence included: where the seeding left it.
    A test of another folder may have restarted it since (the shared `pg_dsn` truncates with
    RESTART IDENTITY), and under pytest-xdist such tests run on the same worker between these:
    the next job would then take the id of a seeded one."""
    (sequence,) = pg_janitor.execute(
        "SELECT pg_get_serial_sequence('chronoq_jobs', 'id')"
    ).fetchone() or (None,)
    assert isinstance(sequence, str)
    schema, name = sequence.split(".")
    state = pg_janitor.execute(
        sql.SQL("SELECT last_value, is_called FROM {}").format(sql.Identifier(schema, name))
    ).fetchone()
    assert state is not None
    return _restore_script(job_ids=(int(str(state[0])), bool(state[1])))


@pytest.fixture
def pg_dsn(pg_fast: str, pg_janitor: Connection, pg_restore: sql.Composed) -> str:
    """The run's database holding the seeds and nothing else (overrides the shared fixture)."""
    pg_janitor.execute(pg_restore)
    return pg_fast


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Seeds]:
    path = tmp_path_factory.mktemp("hostile") / "seeds.db"
    return path, seeded(f"sqlite:///{path}")


@pytest.fixture
def sqlite_dsn(tmp_path: Path, sqlite_template: tuple[Path, Seeds]) -> str:
    """A SQLite file holding the seeds (overrides the shared fixture)."""
    shutil.copyfile(sqlite_template[0], tmp_path / "chronoq.db")
    return f"sqlite:///{tmp_path / 'chronoq.db'}"


@pytest.fixture(scope="session")
def pg_checker(pg_fast: str) -> Iterator[PostgresStore]:
    """One store for the arena's own looks at PostgreSQL, which saves a test that does not use
    its App the cost of opening one (two connections)."""
    store = PostgresStore(pg_fast, pool_size=1)
    yield store
    store.close()


@pytest.fixture
def arena(dsn: str, request: pytest.FixtureRequest) -> Iterator[Arena]:
    app = App(dsn)
    if dsn.startswith("sqlite"):
        seeds = request.getfixturevalue("sqlite_template")[1]
        opened = Arena(app, dsn, seeds.snapshot, seeds.dead_id)
    else:
        seeds = request.getfixturevalue("pg_seeds")
        checker = request.getfixturevalue("pg_checker")
        opened = Arena(app, dsn, seeds.snapshot, seeds.dead_id, checker)
    yield opened
    app.close()
