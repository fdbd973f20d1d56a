"""The bare SQLite loop is the limit of chronoq's SQLite store only while it runs the store's own
statements: it must drain a file as the store would, and send the same statements in the same
order for a claim and for the finish of a batch of successes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.systems.bare_sqlite import _claim_settings, claim, connect, finish

from chronoq import App, JobSpec
from chronoq.core.jobs import Outcome
from chronoq.storage.base import JobClaimParams, JobFinishParams
from chronoq.storage.sqlite.store import SqliteStore


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "bare.db")


def enqueue(path: str, count: int) -> None:
    app = App(f"sqlite:///{path}")
    app.task(name="noop")(lambda: None)
    app.enqueue_many(JobSpec("noop") for _ in range(count))
    app.close()


@pytest.fixture
def db(path: str) -> Iterator[sqlite3.Connection]:
    enqueue(path, 250)
    conn = connect(path)
    yield conn
    conn.close()


def test_the_loop_drains_every_job_once_in_batches(db: sqlite3.Connection) -> None:
    sizes = []
    while rows := claim(db, _claim_settings(), 100):
        sizes.append(len(rows))
        finish(db, rows)
    assert sizes == [100, 100, 50]
    states = db.execute(
        "SELECT status, attempts, lease_token, count(*) FROM chronoq_jobs GROUP BY 1, 2, 3"
    )
    assert [tuple(row) for row in states] == [("done", 1, 1, 250)]


def test_the_loop_sends_the_statements_the_store_sends(path: str) -> None:
    enqueue(path, 20)
    store = SqliteStore(f"sqlite:///{path}")
    store_sent = traced(store._db)
    params = JobClaimParams(["default"], 10, "w", leases={"noop": 60.0}, max_attempts={"noop": 3})
    jobs = store.job_claim_with_wakeup(params).jobs
    store.job_finish_many([JobFinishParams(job.id, job.lease_token, Outcome.DONE) for job in jobs])
    store.close()
    db = connect(path)
    bare_sent = traced(db)
    finish(db, claim(db, _claim_settings(), 10))
    db.close()
    assert len(jobs) == 10
    assert bare_sent == store_sent


def traced(db: sqlite3.Connection) -> list[str]:
    """The statements `db` runs from now on, each by its first line (its name's comment or its
    first words: the values bound to it differ)."""
    sent: list[str] = []
    db.set_trace_callback(lambda statement: sent.append(statement.strip().splitlines()[0]))
    return sent
