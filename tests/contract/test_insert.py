"""Contract: enqueueing jobs, one at a time and in bulk, and the live-key rule."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from chronoq.core.enqueue import MAX_ATTEMPTS_LIMIT
from chronoq.core.jobs import JobStatus, Outcome
from chronoq.storage.base import JobInsertParams, JobInsertResult
from chronoq.storage.postgres import inserts as postgres_inserts
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlstore import BULK_THRESHOLD

from .support import (
    DEADLINE,
    Store,
    claim,
    claim_one,
    finish,
    get,
    insert,
    make_dead,
    open_store,
    params,
    run_together,
)


def test_single_insert_stores_every_field(store: Store) -> None:
    run_at = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    job = params(
        "mail",
        "send",
        {"to": "a@example.com"},
        run_at=run_at,
        priority=7,
        max_attempts=3,
        lease_seconds=12.5,
        key="k1",
    )
    [result] = store.job_insert_many([job])
    assert result.created

    stored = get(store, result.id)
    assert (stored.queue, stored.task, stored.payload) == ("mail", "send", {"to": "a@example.com"})
    assert stored.run_at == run_at
    assert stored.run_at.utcoffset() == timedelta(0)
    assert (stored.priority, stored.max_attempts, stored.lease_seconds) == (7, 3, 12.5)
    assert stored.key == "k1"
    assert stored.status is JobStatus.PENDING
    assert (stored.attempts, stored.lease_token, stored.errors) == (0, 0, [])
    assert (stored.locked_until, stored.started_at, stored.finished_at) == (None, None, None)
    assert stored.worker_id is None


def test_created_at_is_the_database_clock(store: Store) -> None:
    before = store.db_now()
    [job_id] = insert(store)
    after = store.db_now()
    assert before <= get(store, job_id).created_at <= after


@pytest.mark.parametrize(
    "run_at",
    [
        datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1999, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
    ],
)
def test_absolute_run_at_round_trips_to_the_microsecond(store: Store, run_at: datetime) -> None:
    [job_id] = insert(store, params(run_at=run_at))
    assert get(store, job_id).run_at == run_at


def test_delay_is_measured_on_the_database_clock(store: Store) -> None:
    before = store.db_now()
    [job_id] = insert(store, params(delay_seconds=30.5))
    after = store.db_now()
    run_at = get(store, job_id).run_at
    assert before + timedelta(seconds=30.5) <= run_at <= after + timedelta(seconds=30.5)


def test_absolute_run_at_wins_over_delay(store: Store) -> None:
    run_at = datetime(2031, 1, 1, tzinfo=UTC)
    [job_id] = insert(store, params(run_at=run_at, delay_seconds=999))
    assert get(store, job_id).run_at == run_at


@pytest.mark.parametrize("count", [2, BULK_THRESHOLD - 1, BULK_THRESHOLD, 3 * BULK_THRESHOLD])
def test_bulk_insert_returns_ids_in_input_order(store: Store, count: int) -> None:
    base = datetime(2030, 1, 1, tzinfo=UTC)
    jobs = [
        params(
            f"q{i % 3}",
            f"t{i}",
            {"i": i},
            run_at=base + timedelta(seconds=i) if i % 2 else None,
            delay_seconds=i,
            priority=i % 5,
            max_attempts=1 + i % 4,
            lease_seconds=1.5 + i,
        )
        for i in range(count)
    ]
    before = store.db_now()
    results = store.job_insert_many(jobs)
    after = store.db_now()

    assert len(results) == count
    assert all(result.created for result in results)
    assert len({result.id for result in results}) == count
    assert [r.id for r in results] == sorted(r.id for r in results)
    for i, result in enumerate(results):
        stored = get(store, result.id)
        assert stored.payload == {"i": i}
        assert (stored.queue, stored.task) == (f"q{i % 3}", f"t{i}")
        assert (stored.priority, stored.max_attempts) == (i % 5, 1 + i % 4)
        assert stored.lease_seconds == 1.5 + i
        if i % 2:
            assert stored.run_at == base + timedelta(seconds=i)
        else:
            assert before + timedelta(seconds=i) <= stored.run_at <= after + timedelta(seconds=i)


def test_bulk_insert_paths_on_postgres(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At BULK_THRESHOLD keyless rows PostgreSQL switches to COPY; keys force unnest."""
    store = pg_store
    copies: list[int] = []
    real_copy = postgres_inserts._copy_rows

    def spy(cur, jobs):  # type: ignore[no-untyped-def]
        copies.append(len(jobs))
        return real_copy(cur, jobs)

    monkeypatch.setattr(postgres_inserts, "_copy_rows", spy)
    insert(store, *[params() for _ in range(BULK_THRESHOLD - 1)])
    assert copies == []
    insert(store, *[params() for _ in range(BULK_THRESHOLD)])
    assert copies == [BULK_THRESHOLD]
    insert(store, *[params(key=f"k{i}") for i in range(BULK_THRESHOLD * 2)])
    assert copies == [BULK_THRESHOLD]
    assert sum(stat.count for stat in store.stats()) == BULK_THRESHOLD * 4 - 1


@pytest.mark.parametrize("count", [2, BULK_THRESHOLD])
def test_bulk_insert_takes_whole_numbers_where_floats_are_expected(
    store: Store, count: int
) -> None:
    jobs = [params(lease_seconds=30 if i % 2 else 1.5, delay_seconds=i % 2) for i in range(count)]
    ids = insert(store, *jobs)
    assert [get(store, job_id).lease_seconds for job_id in ids[:2]] == [1.5, 30.0]


@pytest.mark.parametrize("count", [3, BULK_THRESHOLD])
def test_bulk_insert_stores_every_field_at_the_ends_of_its_range(store: Store, count: int) -> None:
    # At BULK_THRESHOLD rows PostgreSQL writes them with a binary COPY, whose int4 encoder keeps
    # the low 32 bits of a larger number without an error: the ranges enqueue checks must arrive
    # whole, and a timestamp with its offset and microseconds.
    run_at = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    ranges = [(-(2**31), 1), (2**31 - 1, MAX_ATTEMPTS_LIMIT)]  # (priority, max_attempts)
    ends = [
        params(
            "mail",
            "send",
            {"n": "é😀"},
            run_at=run_at,
            priority=priority,
            max_attempts=max_attempts,
            lease_seconds=12.5,
            misfire="skip",
            misfire_grace=0.25,
            rate_key="tenant:é",
            trace_context='{"traceparent": "00-ab-cd-01"}',
        )
        for priority, max_attempts in ranges
    ]
    plain = [params() for _ in range(count - len(ends))]
    ids = insert(store, *ends, *plain)
    for job_id, (priority, max_attempts) in zip(ids[: len(ends)], ranges, strict=True):
        stored = get(store, job_id)
        assert (stored.queue, stored.task, stored.payload) == ("mail", "send", {"n": "é😀"})
        assert (stored.priority, stored.max_attempts) == (priority, max_attempts)
        assert stored.run_at == run_at
        assert (stored.lease_seconds, stored.misfire_grace) == (12.5, 0.25)
        assert (stored.rate_key, stored.trace_context) == (
            "tenant:é",
            {"traceparent": "00-ab-cd-01"},
        )
    rest = get(store, ids[-1])
    assert (rest.priority, rest.max_attempts, rest.rate_key, rest.trace_context) == (
        0,
        None,
        None,
        None,
    )


def test_empty_insert_returns_nothing(store: Store) -> None:
    assert store.job_insert_many([]) == []


# -- keys -----------------------------------------------------------------------------------


def test_second_enqueue_with_a_live_key_returns_the_first_job(store: Store) -> None:
    [first] = store.job_insert_many([params(key="welcome-42", payload={"n": 1})])
    [second] = store.job_insert_many([params(key="welcome-42", payload={"n": 2})])
    assert first.created
    assert (second.id, second.created) == (first.id, False)
    assert get(store, first.id).payload == {"n": 1}


def test_running_job_still_holds_its_key(store: Store) -> None:
    [job_id] = insert(store, params(key="k"))
    claim_one(store)
    [again] = store.job_insert_many([params(key="k")])
    assert (again.id, again.created) == (job_id, False)


@pytest.mark.parametrize("count", [3, 2 * BULK_THRESHOLD])
def test_duplicate_keys_inside_one_bulk_call(store: Store, count: int) -> None:
    [held] = insert(store, params(key="held"))
    jobs = [params(key=f"k{i % (count // 3 + 1)}", payload={"i": i}) for i in range(count)]
    jobs.append(params(key="held"))
    jobs.append(params())
    results = store.job_insert_many(jobs)

    first_of: dict[str, int] = {}
    for job, result in zip(jobs, results, strict=True):
        if job.key == "held":
            assert (result.id, result.created) == (held, False)
        elif job.key is None:
            assert result.created
        elif job.key in first_of:
            assert (result.id, result.created) == (first_of[job.key], False)
        else:
            assert result.created
            first_of[job.key] = result.id
            assert get(store, result.id).payload == json.loads(job.payload_json)


def test_key_is_free_again_once_the_job_is_done(store: Store) -> None:
    [first] = insert(store, params(key="k"))
    assert finish(store, claim_one(store), Outcome.DONE)
    [second] = store.job_insert_many([params(key="k")])
    assert second.created
    assert second.id != first


@pytest.mark.parametrize("how", ["dead", "cancelled", "cancel"])
def test_final_jobs_do_not_block_their_key(store: Store, how: str) -> None:
    if how == "dead":
        first = make_dead(store, params(key="k")).id
    elif how == "cancelled":
        [first] = insert(store, params(key="k"))
        assert finish(store, claim_one(store), Outcome.CANCELLED)
    else:
        [first] = insert(store, params(key="k"))
        store.job_cancel(first)
    results = store.job_insert_many([params(key="k"), params(key="k")])
    assert results[0].created
    assert results[0].id != first
    assert (results[1].id, results[1].created) == (results[0].id, False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch", [1, 5])
def test_concurrent_enqueues_of_one_key_create_one_job(store: Store, batch: int) -> None:

    def enqueue(own: Store, n: int) -> list[JobInsertResult]:
        return own.job_insert_many(
            [params(key=f"k{i}", payload={"thread": n}) for i in range(batch)]
        )

    results = run_together(store, 6, enqueue)
    for i in range(batch):
        column = [thread_results[i] for thread_results in results]
        assert len({result.id for result in column}) == 1
        assert sum(result.created for result in column) == 1
    assert sum(stat.count for stat in store.stats()) == batch


def test_keyed_and_keyless_jobs_are_independent(store: Store) -> None:
    results = store.job_insert_many([params(key="k"), params(), params(), params(key="k2")])
    assert all(r.created for r in results)
    assert claim(store, limit=10) != []


# -- bad data -------------------------------------------------------------------------------

NASTY_PAYLOAD: dict[str, Any] = {
    "unicode": "héllo ✓ 😀 \u2028 \u2029 ü ß 中文 עברית",
    "quotes": "it's \"quoted\" `back` ''",
    "sql": "'); DROP TABLE chronoq_jobs; -- ; SELECT * FROM pg_user; /* */",
    "html": "<script>alert('x')</script> &amp; <b>bold</b>",
    "backslashes": "C:\\temp\\new \\n \\u0000 \\\\",
    "control": "tab\there\nnewline\r\ncrlf \x01 \x1f",
    "copy_escapes": "\\.\n\\N\t|,",
    "empty": "",
    "nothing": None,
    "flags": [True, False],
    "numbers": [0, -1, 1.5, 1e-07, 2**53 + 1, 2**70, -(2**63)],
    "nested": {"a": [{"b": {"c": []}}], "": {}},
    "tab\tand 'quote' key": "value",
}


def _nasty_jobs(count: int, *, keyed: bool) -> list[JobInsertParams]:
    return [
        params(
            "q'uote\"s -- ;",
            "t; DROP TABLE x; --",
            NASTY_PAYLOAD | {"i": i},
            key=f"k'ey\"{i} 😀" if keyed else None,
        )
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("count", "keyed"), [(1, True), (1, False), (5, True), (BULK_THRESHOLD, False)]
)
def test_nasty_payloads_and_names_round_trip(store: Store, count: int, keyed: bool) -> None:
    jobs = _nasty_jobs(count, keyed=keyed)
    ids = insert(store, *jobs)
    for i, job_id in enumerate(ids):
        stored = get(store, job_id)
        assert stored.payload == NASTY_PAYLOAD | {"i": i}
        assert stored.queue == "q'uote\"s -- ;"
        assert stored.task == "t; DROP TABLE x; --"
        assert stored.key == (f"k'ey\"{i} 😀" if keyed else None)
    claimed = claim(store, queues=["q'uote\"s -- ;"], limit=count + 1)
    assert sorted(job.id for job in claimed) == sorted(ids)


# -- streamed bulk insert: jobs are taken from an iterator as they are written ---------------


@pytest.mark.parametrize("count", [1, 5, BULK_THRESHOLD + 36])
def test_streamed_insert_numbers_jobs_in_input_order(store: Store, count: int) -> None:
    jobs = [params(payload={"n": n}, delay_seconds=n % 3) for n in range(count)]
    results = store.job_insert_stream(iter(jobs))
    ids = [r.id for r in results]
    assert all(r.created for r in results)
    assert ids == sorted(ids) and len(set(ids)) == count
    assert [get(store, job_id).payload for job_id in ids] == [{"n": n} for n in range(count)]
    delayed = get(store, ids[-1])
    assert delayed.run_at - get(store, ids[0]).run_at == timedelta(seconds=(count - 1) % 3)


class Refused(Exception):
    """What a validating iterator raises for a bad job."""


def failing_at(position: int, count: int) -> Any:
    for n in range(count):
        if n == position:
            raise Refused(f"job {n} is bad")
        yield params(payload={"n": n})


@pytest.mark.parametrize(("count", "position"), [(5, 3), (200, 0), (200, 150), (200, 199)])
def test_a_streamed_insert_that_fails_midway_stores_nothing(
    store: Store, count: int, position: int
) -> None:
    [kept] = insert(store)
    with pytest.raises(Refused):
        store.job_insert_stream(failing_at(position, count))
    assert sum(s.count for s in store.stats()) == 1
    assert get(store, kept).status is JobStatus.PENDING
    assert len(store.job_insert_stream(iter([params(), params(), params()]))) == 3


def test_a_streamed_insert_takes_keyed_jobs_after_the_bulk_ones(store: Store) -> None:
    [held] = insert(store, params(key="held"))
    jobs = [params(payload={"n": n}) for n in range(BULK_THRESHOLD + 10)]
    jobs += [
        params(payload={"n": "keyed"}, key="new"),
        params(payload={"n": "again"}, key="new"),
        params(payload={"n": "taken"}, key="held"),
        params(payload={"n": "last"}),
    ]
    results = store.job_insert_stream(iter(jobs))
    ids = [result.id for result in results]
    assert [result.created for result in results] == [True] * (BULK_THRESHOLD + 11) + [
        False,
        False,
        True,
    ]
    assert ids[-3:-1] == [ids[-4], held]
    created = [job_id for job_id, result in zip(ids, results, strict=True) if result.created]
    assert created == sorted(created) and len(set(created)) == len(created)
    payloads = [get(store, job_id).payload["n"] for job_id in created]
    assert payloads == [*range(BULK_THRESHOLD + 10), "keyed", "last"]


def test_a_streamed_insert_that_fails_after_its_keyed_jobs_stores_nothing(store: Store) -> None:
    def jobs() -> Any:
        yield from (params() for _ in range(BULK_THRESHOLD))
        yield params(key="k")
        raise Refused("bad")

    with pytest.raises(Refused):
        store.job_insert_stream(jobs())
    assert store.stats() == []


def test_a_streamed_insert_returns_none_of_the_ids_others_took_meanwhile(
    pg_store: PostgresStore,
) -> None:
    """Jobs inserted by another session while the COPY runs take ids among its own (each row
    takes its id as the server reads it): they are neither returned nor counted."""
    other = open_store(pg_store)
    theirs: list[int] = []
    # Rows larger than psycopg's buffer are sent as they are written (all but a last few KB,
    # which libpq sends with the next), so the server can be waited for: it has read a row
    # when the COPY's progress counts it. The COPY starts once the first jobs are in hand.
    padding = "x" * 40_000
    total = 4 * BULK_THRESHOLD

    def jobs() -> Any:
        for n in range(total):
            if n > BULK_THRESHOLD and n % BULK_THRESHOLD == 1:
                copied_at_least(pg_store, n - 1)
                theirs.extend(insert(other, params("elsewhere")))
            yield params(payload={"n": n, "padding": padding})

    try:
        ids = [result.id for result in pg_store.job_insert_stream(jobs())]
    finally:
        other.close()
    assert len(theirs) == 3 and not set(theirs) & set(ids)
    assert ids == sorted(ids) and ids[0] < min(theirs) and max(theirs) < ids[-1]
    assert [get(pg_store, job_id).payload["n"] for job_id in ids] == list(range(total))


def copied_at_least(store: PostgresStore, rows: int) -> None:
    """Wait until a COPY into the jobs table has taken `rows` rows."""
    deadline = time.monotonic() + DEADLINE
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT tuples_processed FROM pg_stat_progress_copy"
                " WHERE relid = 'chronoq_jobs'::regclass"
            ).fetchone()
            if row is not None and row[0] >= rows:
                return
    raise AssertionError(f"no COPY took {rows} rows within {DEADLINE} s")


@pytest.mark.parametrize("autocommit", [False, True])
def test_a_batch_in_a_callers_savepoint_or_autocommit_gets_its_own_ids(
    pg_store: PostgresStore, autocommit: bool
) -> None:
    """A COPY's ids are read back by the transaction that inserted the rows: in a savepoint
    that is a subtransaction, and a connection in autocommit mode gets a transaction of its
    own for the COPY and the read."""
    jobs = [params(payload={"n": n}) for n in range(BULK_THRESHOLD)]
    with psycopg.connect(pg_store.dsn, autocommit=autocommit) as conn:
        [before] = pg_store.job_insert_many([params()], conn=conn)
        with conn.transaction():
            results = pg_store.job_insert_many(jobs, conn=conn)
        conn.commit()
    ids = [result.id for result in results]
    assert before.id < ids[0] and ids == sorted(ids)
    assert [get(pg_store, job_id).payload["n"] for job_id in ids] == list(range(BULK_THRESHOLD))
