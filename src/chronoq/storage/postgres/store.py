"""The PostgreSQL store: production storage and `FOR UPDATE SKIP LOCKED` claims.

Connections come from a small psycopg pool in autocommit mode (`pool.py`: one that reconnects
within seconds of the database's return): every statement here is one atomic unit, so none of
them holds a transaction open across a round trip. Statements are prepared by psycopg after a
few executions, which matters for the claim and finish hot paths.
How jobs are inserted (COPY, keyed and unique inserts) is in `inserts.py`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, LiteralString, cast

import psycopg
from psycopg.pq.abc import PGresult
from psycopg.rows import dict_row, scalar_row, tuple_row
from psycopg.types.json import Jsonb

from chronoq.coordination.legacy import warn_leader_elector
from chronoq.coordination.postgres import PostgresElector
from chronoq.core.jobs import MAX_ID, Claim, Job, JobProgress, Outcome, Wakeup
from chronoq.core.schedules import Schedule
from chronoq.errors import KeyConflict, SchemaMissing, StoreError, StoreUnavailable
from chronoq.storage.base import (
    LATENESS_BOUNDS,
    IdClaim,
    JobClaimIdsParams,
    JobClaimParams,
    JobFinishParams,
    JobInsertParams,
    JobInsertResult,
    JobLeaseRef,
    JobStageParams,
    Overview,
    OverviewParams,
    ProcessSessionsEndParams,
    ScheduleUpsertParams,
    Staging,
)
from chronoq.storage.dsn import check_postgres_dsn, redact, session_name
from chronoq.storage.limited import claim_limited
from chronoq.storage.postgres.inserts import insert_many_async, insert_on, insert_streamed
from chronoq.storage.postgres.limits import PostgresLimitedIO
from chronoq.storage.postgres.pool import ReconnectingPool
from chronoq.storage.postgres.session import Q, end_sessions, stale_plan
from chronoq.storage.postgres.session import configure_session as _configure_session
from chronoq.storage.postgres.session import first_line as _first_line
from chronoq.storage.rows import (
    ClaimColumns,
    job_from_row,
    overview_from_rows,
    overview_since,
    retry_delay,
    schedule_args,
    schedule_from_row,
    storable_id,
    storable_text,
)
from chronoq.storage.sqlstore import Connection, SqlStore
from chronoq.storage.tier import (
    check_stage_params,
    id_claim,
    stage_horizon_seconds,
    staging,
    storable_refs,
)

log = logging.getLogger("chronoq.storage.postgres")


class PostgresStore(SqlStore):
    """`JobStore` on PostgreSQL ≥ 13."""

    Q = Q
    MIGRATIONS = "chronoq.storage.postgres"

    def __init__(self, dsn: str, *, pool_size: int = 4, connect_timeout: float = 10.0) -> None:
        check_postgres_dsn(dsn)
        self.dsn = dsn
        self.dsn_display = redact(dsn)
        # The claim's column layout, by the field names it was read from (_claim_columns).
        self._claim_layout: tuple[tuple[bytes | None, ...], ClaimColumns] | None = None
        self._probe(connect_timeout)
        self._pool = ReconnectingPool(
            dsn,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
            name="chronoq",
            timeout=connect_timeout,  # how long a checkout waits before StoreUnavailable
            configure=_configure_session,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as exc:
            self._pool.close()
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.dsn_display}: {_first_line(exc)}"
            ) from None

    def _probe(self, timeout: float) -> None:
        """Connect once before opening the pool: a refused connection or a bad password then
        fails at once with the server's reason, instead of after the pool's retries time out."""
        try:
            psycopg.connect(self.dsn, connect_timeout=max(2, math.ceil(timeout))).close()
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.dsn_display}: {_first_line(exc)}"
            ) from None

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaMissing(
                f"the chronoq tables are missing in {self.dsn_display}: run `chronoq migrate`"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"PostgreSQL at {self.dsn_display} failed: {_first_line(exc)}"
            ) from exc
        except psycopg.errors.UniqueViolation as exc:
            raise KeyConflict(f"a live job already holds that key: {_first_line(exc)}") from exc
        except psycopg.errors.IntegrityError as exc:
            raise StoreError(f"the database refused the change: {_first_line(exc)}") from exc
        except psycopg.errors.FeatureNotSupported as exc:
            if not stale_plan(exc):
                raise
            # Inside a transaction, which the session's cursor cannot send again: it was rolled
            # back, and the next call prepares its statements anew.
            raise StoreError(
                "the schema changed during the transaction (a migration ran); nothing was "
                "changed, try again"
            ) from exc

    # -- dialect hooks (see SqlStore) -----------------------------------------------------

    def _read(self) -> AbstractContextManager[psycopg.Connection[dict[str, Any]]]:
        return self._conn()

    def _write(self) -> AbstractContextManager[psycopg.Connection[dict[str, Any]]]:
        return self._conn()  # autocommit: each statement commits on its own

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        with self._conn() as conn, conn.transaction():
            yield conn

    def _lock_migrations(self, db: Connection) -> None:
        db.execute(Q["migrations_lock"])

    def _run_script(self, db: Connection, script: LiteralString) -> None:
        db.execute(script)

    def _clock(self) -> None:
        return None  # the statements read clock_timestamp() themselves

    def _pinned(self, moment: datetime | None) -> datetime | None:
        return moment

    def _time_arg(self, moment: datetime | None) -> datetime | None:
        return moment

    def _seconds_arg(self, seconds: float) -> float:
        return seconds

    def _array(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def _time(self, value: Any) -> datetime | None:
        return cast("datetime | None", value)

    def _list(self, value: Any) -> list[Any]:
        return list(value)

    def _job(self, row: Mapping[str, Any]) -> Job:
        return job_from_row(row)

    def _schedule(self, row: Mapping[str, Any]) -> Schedule:
        return schedule_from_row(row)

    # -- the clock ------------------------------------------------------------------------

    def db_now(self) -> datetime:
        with self._conn() as conn:
            return _db_now(conn)

    # -- enqueue --------------------------------------------------------------------------

    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]:
        if not params:
            return []
        if conn is not None:
            return insert_on(conn, params)
        if len(params) == 1:
            # One job is one INSERT, atomic on its own (a key's retry loop and a unique period's
            # transaction see to themselves): BEGIN and COMMIT would be two more round trips on
            # the web-request path.
            with self._conn() as own:
                return insert_on(own, params)
        with self._conn() as own, own.transaction():
            return insert_on(own, params)

    def _insert_streamed(self, jobs: Iterator[JobInsertParams]) -> list[JobInsertResult]:
        with self._conn() as conn:
            return insert_streamed(conn, jobs)

    async def job_insert_many_async(
        self, params: Sequence[JobInsertParams], conn: Any
    ) -> list[JobInsertResult]:
        """Enqueue on the caller's async psycopg connection, inside its transaction."""
        return await insert_many_async(conn, params)

    # -- the worker's statements ----------------------------------------------------------

    def job_claim_with_wakeup(self, params: JobClaimParams) -> Claim:
        args = {
            "queues": list(params.queues),
            "limit": max(0, params.limit),
            **_attempt_args(params),
        }
        with self._conn() as conn:
            # Tuples in binary: every column arrives typed, and the claim's rows are read into
            # Jobs without a dict each (see ClaimColumns).
            with conn.cursor(row_factory=tuple_row) as cur:
                rows = cur.execute(Q["job_claim"], args, binary=True).fetchall()
                columns = self._claim_columns(cur.pgresult)
            first = rows[0]
            db_now_at, next_run_at_at, next_expiry_at = columns.wakeup_at
            wakeup = Wakeup(first[db_now_at], first[next_run_at_at], first[next_expiry_at])
            read, id_at = columns.read, columns.id_at
            jobs = [read(row) for row in rows if row[id_at] is not None]
            limited = first[columns.limited_at]
            if limited and len(jobs) < params.limit:
                with conn.transaction():
                    more, again = claim_limited(
                        PostgresLimitedIO(conn), limited, params, params.limit - len(jobs)
                    )
                jobs.extend(more)
                wakeup = wakeup.sooner(again)
        jobs.sort(key=lambda job: (-job.priority, job.run_at, job.id))
        return Claim(jobs, wakeup)

    def _claim_columns(self, result: PGresult | None) -> ClaimColumns:
        """The claim's column layout, read from its result's field names: kept while they
        stay the same (a migration adding a column to chronoq_jobs changes them), since a
        cursor's `description` makes an object per column at each call, 34 of them, about
        30 µs a claim, and the reader built from them 5 µs more."""
        if result is None:
            raise StoreError("the claim returned no result")
        names = tuple(map(result.fname, range(result.nfields)))
        known = self._claim_layout
        if known is not None and known[0] == names:
            return known[1]
        columns = ClaimColumns.of([(name or b"").decode() for name in names])
        self._claim_layout = (names, columns)  # one assignment: the I/O threads share it
        return columns

    # -- tiered dispatch (see chronoq.storage.tier) ---------------------------------------

    def job_claim_ids(self, params: JobClaimIdsParams) -> IdClaim:
        refs, unstorable = storable_refs(params.refs)
        args = {
            "ids": [r.id for r in refs],
            "tokens": [r.lease_token for r in refs],
            **_attempt_args(params),
        }
        with self._conn() as conn:
            rows = conn.execute(Q["job_claim_staged"], args).fetchall()
        verdicts = [
            (row["given_id"], row["verdict"], row["early_run_at"])
            for row in rows
            if row["given_id"] is not None
        ]
        jobs = [job_from_row(row) for row in rows if row["verdict"] == "job"]
        return id_claim(rows[0]["db_now"], jobs, verdicts, unstorable)

    def job_stage_candidates(self, params: JobStageParams) -> Staging:
        check_stage_params(params)
        args = {
            "partitions": sorted(set(params.partitions)),
            "partition_count": params.partition_count,
            "horizon": stage_horizon_seconds(params),
            "after_id": max(0, min(params.after_id, MAX_ID)),
            "limit": max(0, params.limit),
            "now": params.now,
        }
        with self._conn() as conn:
            # Never prepared: after a few runs a prepared statement may switch to a generic plan,
            # which cannot see how near the horizon's end is (the one it chose was 5 times
            # slower with a million pending jobs, and grows with the table).
            rows, read_at = _fetch_timed(conn, Q["job_stage_candidates"], args)
        return replace(staging(rows[0]["db_now"], rows, self._time), read_at=read_at)

    def job_finish_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        if not params:
            return set()
        if all(
            p.outcome == Outcome.DONE and p.error is None and p.output_json is None for p in params
        ):
            return self._complete_many(params)
        args = {
            "ids": [p.id for p in params],
            "tokens": [p.lease_token for p in params],
            "outcomes": [str(p.outcome) for p in params],
            "delays": [retry_delay(p.retry_delay) for p in params],
            "keeps": [p.keep_place for p in params],
            "outputs": [p.output_json for p in params],
            "errors": [
                Jsonb(storable_text(p.error)) if p.error is not None else None for p in params
            ],
        }
        with self._conn() as conn:
            accepted = _ids(conn, Q["job_finish_many"], args)
            _count_fence_rejections(conn, [(p.id, p.lease_token) for p in params], accepted)
        return accepted

    def _complete_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        args = {
            "ids": bigint_array_text([p.id for p in params]),
            "tokens": bigint_array_text([p.lease_token for p in params]),
        }
        with self._conn() as conn:
            accepted = _ids(conn, Q["job_complete_many"], args)
            _count_fence_rejections(conn, [(p.id, p.lease_token) for p in params], accepted)
        return accepted

    def job_complete_in(self, conn: Any, ref: JobLeaseRef, output_json: str | None = None) -> bool:
        with conn.cursor() as cur:
            cur.execute(Q["job_complete_in"], _complete_args(ref, output_json))
            return cur.fetchone() is not None

    async def job_complete_in_async(
        self, conn: Any, ref: JobLeaseRef, output_json: str | None = None
    ) -> bool:
        async with conn.cursor() as cur:
            await cur.execute(Q["job_complete_in"], _complete_args(ref, output_json))
            return await cur.fetchone() is not None

    def _fenced_rows(
        self, query: str, refs: Sequence[JobLeaseRef], **extra: Any
    ) -> list[dict[str, Any]]:
        if not refs:
            return []
        with self._conn() as conn:
            rows = conn.execute(Q[query], self._refs_args(refs) | extra).fetchall()
            accepted = {row["id"] for row in rows}
            _count_fence_rejections(conn, [(r.id, r.lease_token) for r in refs], accepted)
        return rows

    @staticmethod
    def _refs_args(refs: Sequence[JobLeaseRef]) -> dict[str, Any]:
        return {"ids": [r.id for r in refs], "tokens": [r.lease_token for r in refs]}

    def _progress_args(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress]
    ) -> dict[str, Any]:
        reported = [progress.get(r.id) for r in refs]
        return {
            "progress": [p.fraction if p is not None else None for p in reported],
            "notes": [p.note if p is not None else None for p in reported],
        }

    def job_next_wakeup(self, queues: Sequence[str]) -> Wakeup:
        with self._conn() as conn:
            row = conn.execute(Q["job_next_wakeup"], {"queues": list(queues)}).fetchone()
        assert row is not None
        return Wakeup(row["db_now"], row["next_run_at"], row["next_lease_expiry"])

    def overview(self, params: OverviewParams) -> Overview:
        with self._conn() as conn:
            queues = conn.execute(Q["overview_queues"]).fetchall()
            db_now = queues[0]["db_now"] if queues else _db_now(conn)
            since = overview_since(db_now, params)
            finished = (
                []
                if since is None
                else conn.execute(
                    Q["overview_finished"],
                    {"since": since, "bucket": params.bucket, "bounds": list(LATENESS_BOUNDS)},
                ).fetchall()
            )
        return overview_from_rows(db_now, queues, finished)

    # -- schedules: the upsert tells creation by xmax -----------------------------------

    def schedule_upsert(self, params: ScheduleUpsertParams) -> bool:
        args = schedule_args(params)
        with self._conn() as conn:
            row = conn.execute(Q["schedule_upsert"], args).fetchone()
        return bool(row and row["created"])

    # -- leadership -----------------------------------------------------------------------

    def elector(self, duty: str, holder: str, ttl: float, partitions: int = 1) -> PostgresElector:
        return PostgresElector(self, duty, holder, ttl, partitions)

    def leader_elector(self, duty: str, holder: str, ttl: float) -> PostgresElector:
        warn_leader_elector()
        return self.elector(duty, holder, ttl)

    def open_listener(self) -> PostgresListener:
        return PostgresListener(self.dsn, self.dsn_display)

    def open_finish_listener(self) -> PostgresListener:
        return PostgresListener(self.dsn, self.dsn_display, channel="listen_finished")

    def job_watch(self, job_id: int) -> None:
        if not storable_id(job_id):
            return  # no job has it; the waiter's look says so
        with self._conn() as conn:
            conn.execute(Q["job_watch"], {"id": job_id})

    def process_sessions_end(self, params: ProcessSessionsEndParams) -> int:
        return end_sessions(self._conn, session_name(params.worker_id), params.timeout)

    def close(self) -> None:
        self._pool.close()


def _attempt_args(params: JobClaimParams | JobClaimIdsParams) -> dict[str, Any]:
    """How a claim starts attempts, the same whether it chose the rows or was given them."""
    return {
        "worker_id": params.worker_id,
        "now": params.now,
        "leases": Jsonb(dict(params.leases)),
        "max_attempts": Jsonb(dict(params.max_attempts)),
        "default_max_attempts": params.default_max_attempts,
    }


def _complete_args(ref: JobLeaseRef, output_json: str | None) -> dict[str, Any]:
    return {"id": ref.id, "token": ref.lease_token, "output": output_json}


def _db_now(conn: psycopg.Connection[dict[str, Any]]) -> datetime:
    row = conn.execute(Q["db_now"]).fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now


def bigint_array_text(values: Sequence[int]) -> str:
    """A list of ints as PostgreSQL's array text, for a `%s::bigint[]` parameter. psycopg dumps a
    list element by element in Python, with a regular-expression test for quoting on each; the
    finish of every batch sends two such lists, and ints never need quoting."""
    return "{" + ",".join(map(str, values)) + "}"


def _ids(conn: psycopg.Connection[Any], query: LiteralString, args: dict[str, Any]) -> set[int]:
    """The ids a statement returns (its one column), fetched at once: iterating its cursor
    would cost a Python call and a dict per row, and a batch finish returns a row per job."""
    with conn.cursor(row_factory=scalar_row) as cur:
        ids: list[int] = cur.execute(query, args).fetchall()
    return set(ids)


def _count_fence_rejections(
    conn: psycopg.Connection[dict[str, Any]], pairs: list[tuple[int, int]], accepted: set[int]
) -> None:
    """In the write's own transaction, so a count is never lost or doubled."""
    refused = [(job_id, token) for job_id, token in pairs if job_id not in accepted]
    if refused:
        conn.execute(
            Q["job_fence_rejected"],
            {"ids": [r[0] for r in refused], "tokens": [r[1] for r in refused]},
        )


class PostgresListener:
    """LISTEN on a dedicated connection; `wait` returns on the first notification."""

    def __init__(self, dsn: str, dsn_display: str, *, channel: str = "listen") -> None:
        """`channel`: the statement that subscribes (`listen`: jobs that became pending,
        `listen_finished`: jobs that reached a final state)."""
        self._dsn_display = dsn_display
        try:
            self._conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot LISTEN on PostgreSQL at {dsn_display}: {_first_line(exc)}"
            ) from None
        try:
            _configure_session(self._conn)
            self._conn.execute(Q[channel])
        except BaseException:
            self._conn.close()
            raise

    def wait(self, timeout: float) -> bool:
        try:
            for _ in self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
                return True
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"lost the LISTEN connection to {self._dsn_display}: {_first_line(exc)}"
            ) from exc
        return False

    def notices(self, timeout: float) -> list[str]:
        try:
            first = list(self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1))
            # Whatever else has arrived meanwhile, without waiting for more.
            rest = list(self._conn.notifies(timeout=0.0)) if first else []
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"lost the LISTEN connection to {self._dsn_display}: {_first_line(exc)}"
            ) from exc
        return [notice.payload for notice in first + rest]

    def close(self) -> None:
        self._conn.close()


def _fetch_timed(
    conn: psycopg.Connection[Any], query: LiteralString, args: Mapping[str, Any]
) -> tuple[list[Any], float]:
    """The rows of an unprepared `query`, and the monotonic midpoint of its own round trip
    (the clock it reads is pinned there; the wait for the pooled connection is left out)."""
    sent = time.monotonic()
    rows = conn.execute(query, args, prepare=False).fetchall()
    return rows, (sent + time.monotonic()) / 2
