"""PostgreSQL's notifications: who is woken by what.

PostgreSQL wakes every connection that has run LISTEN in the database at each NOTIFY, whatever
its channel, so a notification nobody needs costs a transaction in every listening backend. A
finish notifies only for a job someone waits for (`job_watch`), a waiter's mark wakes no worker,
and a statement making many jobs pending sends one notification a queue.

What a connection was sent is read up to a sentinel notified after the statements under test:
notifications arrive in the order their transactions committed, so anything those statements
sent comes before it, and a test never waits for something not to happen.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import JobFinishParams
from chronoq.storage.postgres.store import PostgresStore
from tests.contract.support import DEADLINE, claim, claim_one, get, insert, params, ref

SENTINEL = "sentinel"
FINISHED = "chronoq_jobs_finished"
PENDING = "chronoq_jobs"


@pytest.fixture
def listening(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {FINISHED}")
        conn.execute(f"LISTEN {PENDING}")
        yield conn


def sent_before_sentinel(
    pg_dsn: str, conn: psycopg.Connection[tuple[object, ...]], channel: str
) -> list[str]:
    """The payloads `conn` was sent on `channel` before a sentinel notified now."""
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", (channel, SENTINEL))
    payloads: list[str] = []
    for note in conn.notifies(timeout=DEADLINE):
        if note.channel == channel and note.payload == SENTINEL:
            return payloads
        if note.channel == channel:
            payloads.append(note.payload)
    raise AssertionError(f"the sentinel on {channel} never came")


def _done(store: PostgresStore, job_id: int, token: int) -> set[int]:
    return store.job_finish_many([JobFinishParams(job_id, token, Outcome.DONE)])


def test_the_finish_of_a_job_nobody_waits_for_notifies_no_one(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    [job_id] = insert(pg_store)
    job = claim_one(pg_store)
    assert _done(pg_store, job_id, job.lease_token) == {job_id}
    assert sent_before_sentinel(pg_dsn, listening, FINISHED) == []


def test_the_finish_of_watched_jobs_notifies_once_a_statement(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    job_ids = insert(pg_store, params(), params(), params())
    jobs = [claim_one(pg_store) for _ in job_ids]
    for job_id in job_ids[:2]:
        pg_store.job_watch(job_id)
    finished = pg_store.job_finish_many(
        [JobFinishParams(j.id, j.lease_token, Outcome.DONE) for j in jobs]
    )
    assert finished == set(job_ids)
    assert sent_before_sentinel(pg_dsn, listening, FINISHED) == [""]


def test_a_watched_job_that_fails_and_is_retried_notifies_only_when_it_ends(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    [job_id] = insert(pg_store)
    job = claim_one(pg_store)
    pg_store.job_watch(job_id)
    retry = JobFinishParams(job_id, job.lease_token, Outcome.RETRY, 0.0, {"error": "E"})
    assert pg_store.job_finish_many([retry]) == {job_id}
    assert sent_before_sentinel(pg_dsn, listening, FINISHED) == []
    again = claim_one(pg_store)
    assert _done(pg_store, job_id, again.lease_token) == {job_id}
    assert sent_before_sentinel(pg_dsn, listening, FINISHED) == [""]


def test_marking_a_pending_job_wakes_no_worker(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    [job_id] = insert(pg_store)
    assert json.loads(sent_before_sentinel(pg_dsn, listening, PENDING)[0])["queue"] == "q"
    pg_store.job_watch(job_id)
    pg_store.job_watch(job_id)  # marked already: nothing to write
    assert sent_before_sentinel(pg_dsn, listening, PENDING) == []
    assert get(pg_store, job_id).status is JobStatus.PENDING


def test_a_statement_making_many_jobs_pending_sends_one_notification_a_queue(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    insert(
        pg_store, *[params(queue="a") for _ in range(30)], *[params(queue="b") for _ in range(30)]
    )
    claimed = claim(pg_store, queues=["a", "b"], limit=60)
    sent_before_sentinel(pg_dsn, listening, PENDING)  # the inserts' own
    assert len(pg_store.job_release_many([ref(job) for job in claimed])) == 60
    sent = sent_before_sentinel(pg_dsn, listening, PENDING)
    assert sorted(json.loads(payload)["queue"] for payload in sent) == ["a", "b"]


def test_a_deferred_job_wakes_the_workers(
    pg_dsn: str, pg_store: PostgresStore, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A pending job whose run_at moves may now be due sooner: the workers look again."""
    [job_id] = insert(pg_store, params(delay_seconds=3600))
    sent_before_sentinel(pg_dsn, listening, PENDING)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE chronoq_jobs SET run_at = now() WHERE id = %s", (job_id,))
    assert len(sent_before_sentinel(pg_dsn, listening, PENDING)) == 1


def _waiting_on_a_lock(pg_dsn: str) -> bool:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and int(str(row[0])) > 0


def test_a_mark_waits_for_a_finish_under_way_and_leaves_the_ended_job_unmarked(
    pg_dsn: str, pg_store: PostgresStore
) -> None:
    """The waiter's guarantee: a finish that took the row before the mark is waited for, so the
    waiter's next read sees the job ended (no notification will come for it)."""
    [job_id] = insert(pg_store)
    claim_one(pg_store)
    marked = threading.Event()
    with psycopg.connect(pg_dsn) as finisher:
        finisher.execute(
            "UPDATE chronoq_jobs SET status = 'done', finished_at = now(), locked_until = NULL"
            " WHERE id = %s",
            (job_id,),
        )
        watcher = threading.Thread(
            target=lambda: (pg_store.job_watch(job_id), marked.set()), daemon=True
        )
        watcher.start()
        deadline = time.monotonic() + DEADLINE
        while not _waiting_on_a_lock(pg_dsn):
            assert time.monotonic() < deadline, "the mark never waited for the finish"
        assert not marked.is_set()
        finisher.commit()
    assert marked.wait(DEADLINE)
    watcher.join(DEADLINE)
    assert get(pg_store, job_id).status is JobStatus.DONE
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT finish_watched FROM chronoq_jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row == (False,)
