"""Enqueue from SQL (PostgreSQL migration 0006, docs/sql.md): `chronoq_enqueue`,
`chronoq_enqueue_result` and `chronoq_catalog`, called through psycopg as plain SQL, the way a
producer in another language or a trigger in the database calls them.

Each test records worker processes in the fleet registry through the store, as running workers
do, and then enqueues by task name; jobs are read back through the store. The Python producer
without the code (`App(fleet_tasks=True)`) is the reference the SQL path must agree with.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

import chronoq
from chronoq.core.jobs import Job, JobStatus
from chronoq.core.misfire import Misfire
from chronoq.core.validate import encode_payload
from chronoq.errors import ChronoqError
from chronoq.fleet.records import ProcessInfo, TaskInfo
from chronoq.storage.base import ProcessBeatParams
from chronoq.storage.postgres.store import PostgresStore
from tests.helpers import running_worker, wait_until

pytestmark = pytest.mark.postgres

Row = tuple[Any, ...]


def _send_email(to: str, subject: str = "") -> None: ...


def _task(
    name: str = "send_email",
    queue: str = "emails",
    *,
    handler: Callable[..., None] = _send_email,
    priority: int = 3,
    max_attempts: int = 7,
    lease: float = 45.0,
    timeout: float | None = 10.0,
    misfire: Misfire | None = None,
) -> TaskInfo:
    return TaskInfo.describe(
        name=name,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        lease=lease,
        timeout=timeout,
        misfire=misfire or Misfire.parse("run_late", None),
        signature=inspect.signature(handler),
    )


def _worker(process_id: str, *tasks: TaskInfo) -> ProcessInfo:
    queues = tuple(dict.fromkeys(task.queue for task in tasks))
    return ProcessInfo(
        id=process_id, kind="worker", host="h", pid=1, version="1", queues=queues, tasks=tasks
    )


def _beat(
    store: PostgresStore, info: ProcessInfo, *, ago: timedelta = timedelta(0), ttl: float = 30
) -> None:
    """Record `info` as a worker that last refreshed its record `ago` (on the database clock)."""
    store.process_beat(ProcessBeatParams(info, ttl=ttl, now=store.db_now() - ago))


@pytest.fixture
def db(pg_dsn: str) -> Iterator[psycopg.Connection[Row]]:
    """A plain connection of a producer that is not chronoq, committing each statement."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _call(function: str, options: dict[str, Any]) -> sql.Composed:
    """SELECT * FROM function(task, payload, name => value, ...) with the values as parameters."""
    args: list[sql.Composable] = [sql.Placeholder("task"), sql.Placeholder("payload")]
    args += [
        sql.SQL("{} => {}").format(sql.Identifier(name), sql.Placeholder(name)) for name in options
    ]
    return sql.SQL("SELECT * FROM {}({})").format(
        sql.Identifier(function), sql.SQL(", ").join(args)
    )


def _params(task: str | None, payload: Any, options: dict[str, Any]) -> dict[str, Any]:
    return {"task": task, "payload": None if payload is None else Jsonb(payload)} | options


def enqueue(
    db: psycopg.Connection[Row], task: str | None, payload: Any = None, **options: Any
) -> int:
    row = db.execute(_call("chronoq_enqueue", options), _params(task, payload, options)).fetchone()
    assert row is not None
    return int(row[0])


def enqueue_result(
    db: psycopg.Connection[Row], task: str, payload: Any = None, **options: Any
) -> tuple[int, bool]:
    query = _call("chronoq_enqueue_result", options)
    row = db.execute(query, _params(task, payload, options)).fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])


def refused(
    db: psycopg.Connection[Row], task: str | None, payload: Any = None, **options: Any
) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as caught:
        enqueue(db, task, payload, **options)
    return caught.value


def _job(store: PostgresStore, job_id: int) -> Job:
    job = store.job_get(job_id)
    assert job is not None
    return job


def _settings(job: Job) -> tuple[Any, ...]:
    return (
        job.queue,
        job.priority,
        job.max_attempts,
        job.lease_seconds,
        job.misfire,
        job.misfire_grace,
    )


def _job_count(db: psycopg.Connection[Row]) -> int:
    row = db.execute("SELECT count(*) FROM chronoq_jobs").fetchone()
    assert row is not None
    return int(row[0])


# -- the registry's settings ------------------------------------------------------------------


def test_a_job_takes_its_task_settings_from_the_registry(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    skip = Misfire.parse("skip", timedelta(seconds=90))
    _beat(pg_store, _worker("w:1:a", _task(misfire=skip)))
    row = db.execute(
        "SELECT chronoq_enqueue('send_email', '{\"to\": \"a@example.com\"}')"
    ).fetchone()
    assert row is not None
    job = _job(pg_store, row[0])
    assert (job.task, job.payload, job.status) == (
        "send_email",
        {"to": "a@example.com"},
        JobStatus.PENDING,
    )
    assert _settings(job) == ("emails", 3, 7, 45.0, "skip", 90.0)
    assert job.run_at is not None and job.run_at <= pg_store.db_now()


def test_the_live_record_seen_last_wins_then_the_most_recent_one(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    """A rolling deploy: the new release (seen last) wins over the old, and a stopped record,
    however recent, only when no live process knows the task."""
    _beat(
        pg_store,
        _worker("old:1:a", _task(queue="emails", max_attempts=3)),
        ago=timedelta(seconds=4),
    )
    _beat(
        pg_store, _worker("new:1:b", _task(queue="mail", max_attempts=9)), ago=timedelta(seconds=2)
    )
    _beat(pg_store, _worker("gone:1:c", _task(queue="stopped")))
    pg_store.process_stop("gone:1:c")
    assert _settings(_job(pg_store, enqueue(db, "send_email", {"to": "a"})))[:3] == ("mail", 3, 9)

    pg_store.process_stop("new:1:b")
    pg_store.process_stop("old:1:a")
    # Only stopped records are left: the one seen last of the last day.
    assert _job(pg_store, enqueue(db, "send_email", {"to": "a"})).queue == "stopped"


def test_the_catalog_lists_what_live_and_recent_processes_know(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    def resize(image: str) -> None: ...

    _beat(
        pg_store, _worker("w:1:a", _task(), _task("resize", "images", handler=resize, timeout=None))
    )
    _beat(pg_store, _worker("w:2:b", _task("report", "nightly", lease=600)), ago=timedelta(hours=2))
    _beat(pg_store, _worker("w:3:c", _task("ancient", "old")), ago=timedelta(days=2))
    rows = db.execute(
        "SELECT name, queue, max_attempts, lease, timeout, live FROM chronoq_catalog()"
        " ORDER BY name"
    ).fetchall()
    assert rows == [
        ("report", "nightly", 7, 600.0, 10.0, False),
        ("resize", "images", 7, 45.0, None, True),
        ("send_email", "emails", 7, 45.0, 10.0, True),
    ]
    params = db.execute("SELECT params FROM chronoq_catalog('resize')").fetchall()
    assert params == [([{"name": "image", "kind": "positional_or_keyword", "required": True}],)]


def test_stale_records_do_not_count(db: psycopg.Connection[Row], pg_store: PostgresStore) -> None:
    """A record that ended more than a day ago teaches nothing, even before it is pruned."""
    _beat(pg_store, _worker("w:1:a", _task()), ago=timedelta(days=1, minutes=1))
    assert db.execute("SELECT * FROM chronoq_catalog()").fetchall() == []
    error = refused(db, "send_email", {"to": "a"})
    assert (
        error.diag.message_primary == "unknown task 'send_email': no live or recent worker knows it"
    )
    assert _job_count(db) == 0


# -- unknown tasks ----------------------------------------------------------------------------


def test_an_unknown_task_is_refused_with_the_closest_known_name(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task(), _task("resize", "images")))
    error = refused(db, "send_emial", {"to": "a"})
    assert error.sqlstate == "42704"
    assert error.diag.column_name == "task"
    assert error.diag.message_primary == (
        "unknown task 'send_emial': no live or recent worker knows it; did you mean 'send_email'?"
    )
    assert error.diag.message_hint is not None and "queue =>" in error.diag.message_hint
    far = refused(db, "zzz")
    assert far.diag.message_primary == (
        "unknown task 'zzz': no live or recent worker knows it; known: resize, send_email"
    )
    assert _job_count(db) == 0


def test_an_explicit_queue_enqueues_a_task_no_worker_knows_yet(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    job = _job(pg_store, enqueue(db, "resize", {"image": "a.png"}, queue="images"))
    assert (job.task, job.payload) == ("resize", {"image": "a.png"})
    # The settings of a task chronoq knows nothing of; the claiming worker applies its own.
    assert _settings(job) == ("images", 0, None, 60.0, "run_late", None)


def test_the_job_options_win_over_the_registry(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    job_id = enqueue(
        db,
        "send_email",
        {"to": "a"},
        queue="urgent",
        priority=-5,
        max_attempts=2,
        misfire="skip",
        misfire_grace=timedelta(seconds=30),
        delay=timedelta(hours=1),
        rate_key="tenant-1",
    )
    job = _job(pg_store, job_id)
    assert _settings(job) == ("urgent", -5, 2, 45.0, "skip", 30.0)
    assert job.rate_key == "tenant-1"
    assert job.run_at is not None
    assert timedelta(minutes=59) < job.run_at - pg_store.db_now() <= timedelta(hours=1)


# -- the checks -------------------------------------------------------------------------------

_LONG_KEY = "k" * 1001
REFUSALS: list[tuple[str, dict[str, Any], str, str, str]] = [
    # (case, call, sqlstate, column, message)
    ("no task", {"task": None}, "22023", "task", "task name must be a non-empty string, got NULL"),
    (
        "blank task",
        {"task": "  "},
        "22023",
        "task",
        "task name must be a non-empty string, got '  '",
    ),
    (
        "long task",
        {"task": "t" * 201},
        "22023",
        "task",
        "task name is 201 characters long; the limit is 200",
    ),
    (
        "control task",
        {"task": "a\tb"},
        "22023",
        "task",
        "task name 'a\tb' contains control characters",
    ),
    (
        "empty queue",
        {"queue": ""},
        "22023",
        "queue",
        "queue name must be a non-empty string, got ''",
    ),
    (
        "long queue",
        {"queue": "q" * 201},
        "22023",
        "queue",
        "queue name is 201 characters long; the limit is 200",
    ),
    (
        "array payload",
        {"payload": [1, 2]},
        "22023",
        "payload",
        "payload for task 'send_email' must be a JSON object (of the handler's arguments), "
        "got array",
    ),
    (
        "text payload",
        {"payload": "to"},
        "22023",
        "payload",
        "payload for task 'send_email' must be a JSON object (of the handler's arguments), "
        "got string",
    ),
    (
        "misfit payload",
        {"payload": {"too": "a"}},
        "22023",
        "payload",
        "payload does not fit send_email(to, subject): missing 'to'; unexpected 'too'",
    ),
    (
        "run_at and delay",
        {"run_at": datetime(2030, 1, 1, tzinfo=UTC), "delay": timedelta(seconds=1)},
        "22023",
        "run_at",
        "give either run_at or delay, not both",
    ),
    (
        "negative delay",
        {"delay": "-1 second"},
        "22023",
        "delay",
        "delay must not be negative, got -00:00:01",
    ),
    (
        "long delay",
        {"delay": timedelta(days=36501)},
        "22023",
        "delay",
        "delay 36501 days is longer than 100 years",
    ),
    (
        "priority out of range",
        {"priority": 2**31},
        "22023",
        "priority",
        "priority must be between -2147483648 and 2147483647, got 2147483648",
    ),
    (
        "no attempts",
        {"max_attempts": 0},
        "22023",
        "max_attempts",
        "max_attempts must be between 1 and 1000, got 0",
    ),
    (
        "too many attempts",
        {"max_attempts": 1001},
        "22023",
        "max_attempts",
        "max_attempts must be between 1 and 1000, got 1001",
    ),
    (
        "unknown misfire",
        {"misfire": "skp"},
        "22023",
        "misfire",
        "unknown misfire policy 'skp'; did you mean 'skip'? (choose run_late or skip)",
    ),
    (
        "schedule misfire",
        {"misfire": "coalesce"},
        "22023",
        "misfire",
        "misfire policy 'coalesce' applies to schedules only; a one-off job takes 'run_late' "
        "or 'skip'",
    ),
    (
        "negative grace",
        {"misfire": "skip", "misfire_grace": "-5 seconds"},
        "22023",
        "misfire_grace",
        "misfire grace must not be negative, got -00:00:05",
    ),
    ("empty key", {"key": ""}, "22023", "key", "key must be a non-empty string, got ''"),
    (
        "long key",
        {"key": _LONG_KEY},
        "22023",
        "key",
        "key is 1001 characters long; the limit is 1000",
    ),
    (
        "wide key",
        {"key": "é" * 901},
        "22023",
        "key",
        "key is 1802 bytes long in UTF-8; the limit is 1800 bytes",
    ),
    (
        "empty rate key",
        {"rate_key": ""},
        "22023",
        "rate_key",
        "rate_key must be a non-empty string, got ''",
    ),
    (
        "unique_for without key",
        {"unique_for": timedelta(hours=1)},
        "22023",
        "unique_for",
        "unique_for needs a key: give the job's key as well (key => ...)",
    ),
    (
        "zero unique_for",
        {"key": "k", "unique_for": timedelta(0)},
        "22023",
        "unique_for",
        "unique_for must be a positive duration, got 00:00:00",
    ),
    (
        "negative unique_for",
        {"key": "k", "unique_for": timedelta(minutes=-5)},
        "22023",
        "unique_for",
        "unique_for must be a positive duration, got -1 days +23:55:00",
    ),
    (
        "long unique_for",
        {"key": "k", "unique_for": timedelta(days=365 * 101)},
        "22023",
        "unique_for",
        "unique_for 36865 days is longer than 100 years",
    ),
]


@pytest.mark.parametrize(
    ("call", "sqlstate", "column", "message"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_each_check_refuses_with_the_field_and_stores_nothing(
    db: psycopg.Connection[Row],
    pg_store: PostgresStore,
    call: dict[str, Any],
    sqlstate: str,
    column: str,
    message: str,
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    options = {"payload": {"to": "a"}} | call
    task, payload = options.pop("task", "send_email"), options.pop("payload")
    error = refused(db, task, payload, **options)
    assert (error.sqlstate, error.diag.column_name, error.diag.message_primary) == (
        sqlstate,
        column,
        message,
    )
    assert error.diag.message_hint
    assert _job_count(db) == 0


def test_a_run_at_outside_the_years_python_reads_is_refused(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    for moment in ("infinity", "-infinity", "10000-01-01 00:00:00+00"):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
            db.execute(
                "SELECT chronoq_enqueue('t', queue => 'q', run_at => %s::timestamptz)", [moment]
            )
        assert caught.value.diag.column_name == "run_at"
        assert "is not an instant between the years 1 and 9999 in UTC" in str(caught.value)
    assert _job_count(db) == 0


def test_the_payload_limit_counts_compact_json_bytes(db: psycopg.Connection[Row]) -> None:
    """chronoq.payload_limit (1 MiB unless set) measures the payload as the Python producers
    do: compact JSON in UTF-8, without the spaces of PostgreSQL's text form."""
    payload = {"to": "é" * 10, "list": [1, 2, {"a": None}]}
    size = len(encode_payload("t", payload, 2**20).encode())
    db.execute(sql.SQL("SET chronoq.payload_limit = {}").format(sql.Literal(size)))
    assert enqueue(db, "t", payload, queue="q") > 0
    db.execute(sql.SQL("SET chronoq.payload_limit = {}").format(sql.Literal(size - 1)))
    with pytest.raises(psycopg.errors.ProgramLimitExceeded) as caught:
        enqueue(db, "t", payload, queue="q")
    assert caught.value.diag.column_name == "payload"
    assert caught.value.diag.message_primary == (
        f"payload for task 't' is {size} bytes encoded; the limit is {size - 1} bytes"
    )
    db.execute("RESET chronoq.payload_limit")
    assert enqueue(db, "t", {"blob": "x" * 1000}, queue="q") > 0
    with pytest.raises(psycopg.errors.ProgramLimitExceeded):
        enqueue(db, "t", {"blob": "x" * 2**20}, queue="q")
    assert _job_count(db) == 2


def test_a_payload_nested_too_deep_is_refused(db: psycopg.Connection[Row]) -> None:
    def nested(depth: int) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        for _ in range(depth - 1):
            payload = {"a": payload}
        return payload

    assert enqueue(db, "t", nested(256), queue="q") > 0
    error = refused(db, "t", nested(257), queue="q")
    assert (error.sqlstate, error.diag.column_name) == ("22023", "payload")
    assert error.diag.message_primary == (
        "payload for task 't' is nested more than 256 levels deep (objects and arrays)"
    )


def test_a_handler_with_kwargs_takes_any_name_but_its_positional_only_ones(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    def flexible(a: int, /, b: int = 0, **rest: Any) -> None: ...

    _beat(pg_store, _worker("w:1:a", _task("flexible", "q", handler=flexible)))
    error = refused(db, "flexible", {"a": 1, "c": 2})
    assert error.diag.message_primary == (
        "payload does not fit flexible(a, b, **rest): unexpected 'a'; positional-only 'a' "
        "cannot be given in a payload"
    )
    _beat(pg_store, _worker("w:1:a", _task("flexible", "q", handler=lambda b=0, **rest: None)))
    assert enqueue(db, "flexible", {"b": 1, "anything": 2}) > 0


# -- the same job as the Python producer makes ------------------------------------------------

SAME_AS_PYTHON: list[dict[str, Any]] = [
    {},
    {"queue": "other"},
    {"priority": 9, "max_attempts": 2},
    {"misfire": "skip"},
    {"misfire_grace": timedelta(seconds=5)},
    {"misfire": "SKIP", "misfire_grace": timedelta(minutes=2)},
    {"key": "order-1", "rate_key": "tenant-7"},
    # Refused by both:
    {"misfire": "coalesce"},
    {"max_attempts": 0},
    {"key": ""},
    {"queue": ""},
    {"run_at": datetime(2030, 1, 1, tzinfo=UTC), "delay": timedelta(seconds=1)},
]


@pytest.mark.parametrize(
    "options", SAME_AS_PYTHON, ids=lambda options: ",".join(options) or "defaults"
)
def test_sql_and_the_python_producer_without_the_code_store_the_same_job(
    db: psycopg.Connection[Row], pg_store: PostgresStore, pg_dsn: str, options: dict[str, Any]
) -> None:
    skip = Misfire.parse("skip", timedelta(seconds=15))
    _beat(pg_store, _worker("w:1:a", _task(), _task("report", "nightly", misfire=skip)))
    for task, payload in (("send_email", {"to": "a"}), ("report", {})):
        with chronoq.App(pg_dsn, fleet_tasks=True) as producer:
            try:
                python: Job | ChronoqError = _job(
                    pg_store, producer.enqueue(task, payload, **options).id
                )
            except ChronoqError as exc:
                python = exc
        db.execute("UPDATE chronoq_jobs SET status = 'done'")  # frees the key for SQL's job
        try:
            ours: Job | psycopg.Error = _job(pg_store, enqueue(db, task, payload, **options))
        except psycopg.Error as exc:
            ours = exc
        if isinstance(python, Job):
            assert isinstance(ours, Job), ours
            assert (_settings(ours), ours.key, ours.rate_key, ours.payload) == (
                _settings(python),
                python.key,
                python.rate_key,
                python.payload,
            )
        else:
            assert isinstance(ours, psycopg.Error), f"Python refused: {python}"


# -- keys, queues, workers and transactions ---------------------------------------------------


def test_a_key_held_by_a_live_job_returns_that_job(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    first = enqueue_result(db, "t", {"n": 1}, queue="q", key="order-1")
    assert first[1] is True
    assert enqueue_result(db, "t", {"n": 2}, queue="q", key="order-1") == (first[0], False)
    assert enqueue(db, "t", {"n": 3}, queue="q", key="order-1") == first[0]
    assert _job(pg_store, first[0]).payload == {"n": 1}
    # Once the job is no longer live, the key is free for a new one.
    pg_store.job_cancel(first[0])
    second = enqueue_result(db, "t", {"n": 4}, queue="q", key="order-1")
    assert second[1] is True and second[0] != first[0]
    assert _job_count(db) == 2


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
def test_a_key_taken_by_an_open_transaction_waits_for_it(
    db: psycopg.Connection[Row], pg_dsn: str, commit: bool
) -> None:
    """Two producers enqueue one key at once: the second waits for the first's transaction;
    then it gets the first's job if that committed, or stores its own if it rolled back."""
    results: list[tuple[int, bool]] = []
    with psycopg.connect(pg_dsn) as first, psycopg.connect(pg_dsn, autocommit=True) as second:
        held = enqueue_result(first, "t", {"n": 1}, queue="q", key="order-1")
        waiter = threading.Thread(
            target=lambda: results.append(
                enqueue_result(second, "t", {"n": 2}, queue="q", key="order-1")
            )
        )
        waiter.start()
        wait_until(
            lambda: (
                db.execute(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                    [second.info.backend_pid],
                ).fetchone()
                == (True,)
            ),
            what="the second enqueue to wait on the first's key",
        )
        if commit:
            first.commit()
        else:
            first.rollback()
        waiter.join(20)
        assert not waiter.is_alive()
    assert held[1] is True
    ((job_id, created),) = results
    assert (job_id == held[0], created) == (commit, not commit)
    assert _job_count(db) == 1


def test_a_paused_queue_takes_jobs_as_the_python_producers_do(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    pg_store.queue_pause("emails", True)
    _beat(pg_store, _worker("w:1:a", _task()))
    job = _job(pg_store, enqueue(db, "send_email", {"to": "a"}, rate_key="tenant-1"))
    assert (job.queue, job.status, job.rate_key) == ("emails", JobStatus.PENDING, "tenant-1")


def test_a_job_enqueued_from_sql_is_run_by_a_worker(
    db: psycopg.Connection[Row], pg_dsn: str
) -> None:
    """The worker records its tasks; SQL takes the queue from its record; the worker runs it."""
    received: list[dict[str, str]] = []
    ran = threading.Event()
    with chronoq.App(pg_dsn) as app:

        @app.task(queue="emails", max_attempts=4)
        def send_email(to: str, subject: str = "") -> None:
            received.append({"to": to, "subject": subject})
            ran.set()

        options = chronoq.WorkerOptions(beat_interval=0.2, poll_interval=0.2)
        with running_worker(app, options) as (worker, signals):
            assert worker.beacon.recorded.wait(20)
            job_id = enqueue(db, "send_email", {"to": "a@example.com", "subject": "hi"})
            assert ran.wait(20)
            signals.wait_for(lambda: any(job.id == job_id for job, _, _ in signals.finishes))
        job = app.get_job(job_id)
    assert received == [{"to": "a@example.com", "subject": "hi"}]
    assert job is not None
    assert (job.status, job.queue, job.max_attempts, job.attempts) == (
        JobStatus.DONE,
        "emails",
        4,
        1,
    )


@pytest.fixture
def orders(db: psycopg.Connection[Row]) -> Iterator[None]:
    """A table of the user's with a trigger that enqueues a job for each new row."""
    db.execute(
        """
        CREATE TABLE sql_enqueue_orders (id bigint PRIMARY KEY, email text NOT NULL);
        CREATE FUNCTION sql_enqueue_orders_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM chronoq_enqueue('send_email', jsonb_build_object('to', NEW.email),
                                    key => 'order-' || NEW.id);
            RETURN NEW;
        END;
        $$;
        CREATE TRIGGER sql_enqueue_orders_notify AFTER INSERT ON sql_enqueue_orders
            FOR EACH ROW EXECUTE FUNCTION sql_enqueue_orders_notify();
        """
    )
    try:
        yield
    finally:
        db.execute("DROP TABLE sql_enqueue_orders; DROP FUNCTION sql_enqueue_orders_notify()")


@pytest.mark.usefixtures("orders")
def test_a_trigger_enqueues_in_the_writer_transaction(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    seen_inside: list[int] = []

    def order_twice() -> None:
        with db.transaction():
            db.execute("INSERT INTO sql_enqueue_orders VALUES (1, 'a@example.com')")
            seen_inside.append(_job_count(db))
            db.execute("INSERT INTO sql_enqueue_orders VALUES (1, 'again')")

    with pytest.raises(psycopg.errors.UniqueViolation):
        order_twice()
    assert seen_inside == [1]  # the job existed inside the transaction...
    assert _job_count(db) == 0  # ...and rolled back with the order

    with db.transaction():
        db.execute("INSERT INTO sql_enqueue_orders VALUES (1, 'a@example.com')")
        db.execute("INSERT INTO sql_enqueue_orders VALUES (2, 'b@example.com')")
    jobs = db.execute("SELECT task, queue, payload, key FROM chronoq_jobs ORDER BY id").fetchall()
    assert jobs == [
        ("send_email", "emails", {"to": "a@example.com"}, "order-1"),
        ("send_email", "emails", {"to": "b@example.com"}, "order-2"),
    ]


@pytest.mark.usefixtures("orders")
def test_a_refused_enqueue_in_a_trigger_refuses_the_write(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    """No worker knows send_email: the order is refused with the enqueue's error, not stored
    without its job."""
    with pytest.raises(psycopg.errors.UndefinedObject, match="unknown task 'send_email'"):
        db.execute("INSERT INTO sql_enqueue_orders VALUES (1, 'a@example.com')")
    assert db.execute("SELECT count(*) FROM sql_enqueue_orders").fetchone() == (0,)
    assert _job_count(db) == 0


# -- unique for a period ----------------------------------------------------------------------


def test_a_key_unique_for_a_period_returns_the_finished_first_job(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    hour = timedelta(hours=1)
    first = enqueue_result(db, "send_email", {"to": "a"}, key="k", unique_for=hour)
    assert first[1]
    db.execute(
        "UPDATE chronoq_jobs SET status = 'done', finished_at = clock_timestamp() WHERE id = %s",
        (first[0],),
    )
    assert enqueue_result(db, "send_email", {"to": "b"}, key="k", unique_for=hour) == (
        first[0],
        False,
    )
    # The Python producers read the same record.
    with chronoq.App(pg_store.dsn, fleet_tasks=True) as producer:
        taken = producer.enqueue("send_email", {"to": "c"}, key="k", unique_for="1h")
    assert (taken.id, taken.created) == (first[0], False)
    # Without a period, the live rule alone: the key is free.
    assert enqueue_result(db, "send_email", {"to": "d"}, key="k")[1]


def test_a_period_postgresql_cannot_read_is_refused_before_the_call(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    error = refused(db, "send_email", {"to": "a"}, key="k", unique_for="an hour")
    assert error.sqlstate == "22007"  # invalid_datetime_format, from the cast to interval
    assert 'invalid input syntax for type interval: "an hour"' in str(error)
    assert _job_count(db) == 0


def test_unique_for_is_the_last_positional_argument_and_takes_text(
    db: psycopg.Connection[Row], pg_store: PostgresStore
) -> None:
    _beat(pg_store, _worker("w:1:a", _task()))
    row = db.execute(
        "SELECT chronoq_enqueue('send_email', '{\"to\": \"a\"}', NULL, NULL, NULL, 'k', NULL,"
        " NULL, NULL, NULL, NULL, '1 hour')"
    ).fetchone()
    assert row is not None
    again = enqueue_result(db, "send_email", {"to": "a"}, key="k", unique_for="30 minutes")
    assert again == (row[0], False)
