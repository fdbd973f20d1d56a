"""Enqueueing through the App: one bad job refuses the whole batch and stores nothing."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import chronoq
from chronoq.errors import InvalidPayload, NaiveDatetime, UnknownTask
from tests.contract.support import caller_connection


@pytest.fixture
def app(dsn: str) -> Any:
    with chronoq.App(dsn) as application:

        @application.task
        def send(to: str) -> None: ...

        yield application


def total(app: chronoq.App) -> int:
    return sum(s.count for s in app.store.stats())


def test_a_batch_is_numbered_in_input_order(app: chronoq.App) -> None:
    specs = [chronoq.JobSpec("send", {"to": f"user{n}"}) for n in range(300)]
    ids = [r.id for r in app.enqueue_many(specs)]
    assert ids == sorted(ids) and len(set(ids)) == 300
    for n in (0, 150, 299):
        job = app.get_job(ids[n])
        assert job is not None and job.payload == {"to": f"user{n}"}


BAD = [
    (chronoq.JobSpec("sned", {"to": "x"}), UnknownTask, "did you mean 'send'"),
    (chronoq.JobSpec("send", {"too": "x"}), InvalidPayload, "unexpected 'too'"),
    (chronoq.JobSpec("send", {"to": {1, 2}}), InvalidPayload, "not valid JSON"),
    (chronoq.JobSpec("send", {"to": "x"}, run_at=datetime(2030, 1, 1)), NaiveDatetime, "time zone"),
]


@pytest.mark.parametrize("count", [10, 300])
@pytest.mark.parametrize(("bad", "error", "message"), BAD)
def test_one_bad_job_refuses_the_batch(
    app: chronoq.App, count: int, bad: chronoq.JobSpec, error: type[Exception], message: str
) -> None:
    app.enqueue("send", {"to": "already there"})
    specs = [chronoq.JobSpec("send", {"to": f"user{n}"}) for n in range(count)]
    specs[count * 3 // 4] = bad
    with pytest.raises(error, match=message):
        app.enqueue_many(specs)
    assert total(app) == 1


def test_a_bad_job_leaves_the_callers_transaction_usable(app: chronoq.App) -> None:
    specs = [chronoq.JobSpec("send", {"to": f"user{n}"}) for n in range(300)]
    specs[-1] = chronoq.JobSpec("send", {})
    with caller_connection(app.store) as conn:
        app.enqueue("send", {"to": "in the caller's transaction"}, conn=conn)
        with pytest.raises(InvalidPayload, match="missing 'to'"):
            app.enqueue_many(specs, conn=conn)
        conn.commit()
    assert total(app) == 1


@pytest.mark.parametrize("count", [2, 300])
def test_a_batch_joins_a_connection_of_client_side_cursors(pg_dsn: str, count: int) -> None:
    # Django's PostgreSQL connections make client-side cursors, which read text only: the ids
    # reserved for the batch must not be asked for in binary there.
    with (
        chronoq.App(pg_dsn) as app,
        psycopg.connect(pg_dsn, cursor_factory=psycopg.ClientCursor) as conn,
    ):
        specs = [chronoq.JobSpec("send", {"to": f"user{n}"}) for n in range(count)]
        ids = [result.id for result in app.enqueue_many(specs, conn=conn)]
        conn.commit()
        assert ids == sorted(ids) and len(set(ids)) == count
        assert total(app) == count


def test_the_async_batch_refuses_alike(app: chronoq.App) -> None:
    specs = [chronoq.JobSpec("send", {"to": "x"}) for _ in range(300)]
    specs[100] = chronoq.JobSpec("send", {"to": "x", "cc": "y"})
    with pytest.raises(InvalidPayload, match="unexpected 'cc'"):
        asyncio.run(app.enqueue_many_async(specs))
    specs[100] = chronoq.JobSpec("send", {"to": "x"})
    assert len(asyncio.run(app.enqueue_many_async(specs))) == 300
    assert total(app) == 300


def test_configured_options_apply_and_a_parameter_named_key_is_payload(dsn: str) -> None:
    with chronoq.App(dsn) as app:

        @app.task
        def remember(key: str) -> None: ...

        enqueued = remember.configure(delay=timedelta(hours=4), key="job key").defer(
            key="payload value"
        )
        job = app.get_job(enqueued.id)
        assert job is not None
        assert (job.payload, job.key) == ({"key": "payload value"}, "job key")
        # Both come from the database clock; PostgreSQL reads it twice, microseconds apart.
        assert abs(job.run_at - job.created_at - timedelta(hours=4)) < timedelta(seconds=1)
        again = remember.configure(key="job key").defer(key="another payload")
        assert (again.id, again.created) == (enqueued.id, False)  # the key held by a live job
