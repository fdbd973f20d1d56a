"""A migration under running processes: statements prepared before it go on working after it.

psycopg prepares a statement at its fifth execution on a connection, and PostgreSQL refuses a
prepared statement whose result columns changed ("cached plan must not change result type").
Many of chronoq's statements return whole rows (`RETURNING j.*`, `SELECT *`), so a migration
adding a column, as 0011 added `finish_watched` to chronoq_jobs, would break them on every pooled
connection of every process running through the deploy. Each test works in a database of its
own, since it alters the schema the shared test database keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest

from chronoq import App, WorkerOptions
from chronoq.core.jobs import JobStatus, Outcome
from chronoq.errors import StoreError
from chronoq.storage.postgres.store import PostgresStore
from tests.contract.support import DEADLINE, claim_one, finish, get, insert, params
from tests.contract.test_schedules import definition
from tests.helpers import RecordingSignals, running_worker

# More executions than psycopg's prepare threshold (5): the statement is prepared by then.
PREPARED = 7


@pytest.fixture
def migrated(new_database: Callable[[], str]) -> str:
    dsn = new_database()
    store = PostgresStore(dsn)
    store.migrate()
    store.close()
    return dsn


@pytest.fixture
def one_connection(migrated: str) -> Iterator[PostgresStore]:
    """A store whose every call runs on the same pooled connection."""
    store = PostgresStore(migrated, pool_size=1)
    yield store
    store.close()


def add_column(dsn: str, table: str) -> None:
    """What a migration adding a column does, from another connection."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("ALTER TABLE {} ADD COLUMN added_later integer").format(
                psycopg.sql.Identifier(table)
            )
        )


def test_claims_finishes_and_reads_go_on_after_a_column_is_added_to_the_jobs_table(
    one_connection: PostgresStore, migrated: str
) -> None:
    store = one_connection
    ids = insert(store, *(params() for _ in range(PREPARED + 1)))
    for _ in range(PREPARED):
        job = claim_one(store)
        assert finish(store, job, Outcome.DONE)
        get(store, job.id)

    add_column(migrated, "chronoq_jobs")

    job = claim_one(store)
    assert job.id == ids[-1]
    assert get(store, job.id).status == JobStatus.RUNNING
    assert finish(store, job, Outcome.DONE)
    assert get(store, job.id).status == JobStatus.DONE


def test_inside_a_transaction_the_change_is_a_store_error_and_the_next_call_works(
    one_connection: PostgresStore, migrated: str
) -> None:
    store = one_connection
    store.schedule_upsert(definition())
    for paused in [True, False] * 4:  # schedule_pause returns the row, in a transaction
        store.schedule_pause("digest", paused)

    add_column(migrated, "chronoq_schedules")

    with pytest.raises(StoreError, match="schema changed during the transaction"):
        store.schedule_pause("digest", True)
    schedule = store.schedule_pause("digest", True)
    assert schedule is not None and schedule.paused


def test_a_worker_runs_through_a_migration_that_adds_a_column(migrated: str) -> None:
    app = App(migrated, pool_size=1)

    @app.task()
    def noop() -> None:
        pass

    def ended(signals: RecordingSignals, job_id: int) -> Callable[[], bool]:
        return lambda: any(job.id == job_id for job, _, _ in signals.finishes)

    options = WorkerOptions(concurrency=1, batch_size=1)
    try:
        with running_worker(app, options) as (_, signals):
            for _ in range(PREPARED):
                signals.wait_for(ended(signals, app.enqueue("noop").id), DEADLINE)
            add_column(migrated, "chronoq_jobs")
            after = app.enqueue("noop").id
            signals.wait_for(ended(signals, after), DEADLINE)
        assert all(accepted for _, _, accepted in signals.finishes)
        assert get(app.store, after).status == JobStatus.DONE
    finally:
        app.close()


def test_a_leader_keeps_its_term_through_a_column_added_to_the_leaders_table(
    one_connection: PostgresStore, migrated: str
) -> None:
    elector = one_connection.elector("scheduler", "holder-1", 30.0)
    try:
        steps = [elector.step() for _ in range(PREPARED)]
        add_column(migrated, "chronoq_leaders")
        renewed = elector.step()
        holders = {leader.holder for leader in elector.leaders()}
    finally:
        elector.close()
    assert sorted(renewed) == [0] and holders == {"holder-1"}
    assert {step[0].epoch for step in steps} == {renewed[0].epoch}
