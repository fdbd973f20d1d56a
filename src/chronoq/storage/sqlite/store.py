"""The SQLite store: the embedded default, one file, no server.

One connection per store, guarded by a lock: SQLite admits one writer at a time anyway, and a
single connection keeps prepared statements warm. Writes run in `BEGIN IMMEDIATE` so the write
lock is taken before anything is read; several worker processes on one file then serialise their
claims instead of failing with SQLITE_BUSY on a lock upgrade. WAL lets readers go on meanwhile.
How a connection is opened is in `session.py`, how jobs are inserted in `inserts.py`.
"""

from __future__ import annotations

import heapq
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, LiteralString

from chronoq.coordination.legacy import warn_leader_elector
from chronoq.coordination.sqlite import SqliteElector
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
    LeaderTerm,
    Overview,
    OverviewParams,
    ProcessSessionsEndParams,
    ScheduleUpsertParams,
    Staging,
)
from chronoq.storage.dsn import sqlite_path
from chronoq.storage.limited import claim_limited
from chronoq.storage.rows import (
    datetime_to_micros,
    leader_term,
    micros_to_datetime,
    overview_from_rows,
    overview_since,
    retry_delay,
    schedule_args,
    schedule_from_row,
    storable_text,
)
from chronoq.storage.sqlite.inserts import insert_batch, insert_one, insert_streamed
from chronoq.storage.sqlite.limits import (
    SqliteLimitedIO,
    claim_args,
    claim_ids_args,
    claimed_jobs,
    job_from_json_row,
)
from chronoq.storage.sqlite.session import (
    CHANGE_POLL_SECONDS,
    Q,
    connect,
    now_micros,
)
from chronoq.storage.sqlstore import Connection, SqlStore
from chronoq.storage.tier import (
    SKIP,
    check_stage_params,
    id_claim,
    stage_horizon_seconds,
    staging,
    storable_refs,
)


class SqliteStore(SqlStore):
    """`JobStore` on one SQLite file. Migrates itself on open: there is no server to prepare."""

    Q = Q
    MIGRATIONS = "chronoq.storage.sqlite"

    def __init__(self, dsn: str, *, migrate: bool = True) -> None:
        self.path = sqlite_path(dsn)
        self._real_path = os.path.realpath(self.path)  # resolved once: commits announce it
        self.dsn_display = dsn
        self._lock = threading.RLock()
        self._db = connect(self.path)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self._db.close()
                raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute(Q["begin_write"])
                changes = self._db.total_changes
                try:
                    yield self._db
                except BaseException:
                    self._db.execute(Q["rollback"])
                    raise
                self._db.execute(Q["commit"])
                # A write that changed no row (an empty claim, a heartbeat of nothing) is news
                # to nobody: announcing it would wake this process's workers into another
                # empty claim, which would announce itself again, round and round.
                if self._db.total_changes != changes:
                    _LOCAL_COMMITS.announce(self._real_path)
            except sqlite3.OperationalError as exc:
                raise _translate(exc, self.path) from exc
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" in str(exc):
                    raise KeyConflict(f"a live job already holds that key: {exc}") from exc
                raise StoreError(f"the database refused the change: {exc}") from exc

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.OperationalError as exc:
                raise _translate(exc, self.path) from exc

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._write()  # one write transaction is all or nothing already

    # -- dialect hooks (see SqlStore) -----------------------------------------------------

    def _lock_migrations(self, db: Connection) -> None:
        pass  # BEGIN IMMEDIATE serialises migrations already

    def _run_script(self, db: Connection, script: LiteralString) -> None:
        for statement in _statements(script):
            db.execute(statement)

    def _clock(self) -> int:
        return now_micros()

    def _pinned(self, moment: datetime | None) -> int:
        return _pinned(moment)

    def _time_arg(self, moment: datetime | None) -> int | None:
        return _micros(moment)

    def _seconds_arg(self, seconds: float) -> int:
        return int(seconds * 1_000_000)

    def _array(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def _time(self, value: Any) -> datetime | None:
        return micros_to_datetime(value)

    def _list(self, value: Any) -> list[Any]:
        decoded: list[Any] = json.loads(value)
        return decoded

    def _job(self, row: Mapping[str, Any]) -> Job:
        return _job(row)

    def _schedule(self, row: Mapping[str, Any]) -> Schedule:
        return _schedule(row)

    # -- the clock ------------------------------------------------------------------------

    def db_now(self) -> datetime:
        now = micros_to_datetime(now_micros())
        assert now is not None
        return now

    # -- enqueue --------------------------------------------------------------------------

    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]:
        if not params:
            return []
        if conn is not None:
            return [insert_one(conn, job, now_micros()) for job in params]
        with self._write() as db:
            return insert_batch(db, params, now_micros())

    def _insert_streamed(self, jobs: Iterator[JobInsertParams]) -> list[JobInsertResult]:
        with self._write() as db:
            return insert_streamed(db, jobs, now_micros())

    # -- the worker's statements ----------------------------------------------------------

    def job_claim_with_wakeup(self, params: JobClaimParams) -> Claim:
        # Everything in one write transaction: SQLite lives in this process, so statements cost
        # no round trips. The lease expiry is read before the claim, as PostgreSQL's snapshot
        # sees it, so both stores answer alike.
        with self._write() as db:
            # The clock is read under the write lock: a claim that waited for it must not
            # start jobs, or charge a bucket, at an instant before the previous claim's.
            now = _pinned(params.now)
            expiry = db.execute(Q["job_next_lease_expiry"]).fetchone()["next_lease_expiry"]
            requested = db.execute(Q["queue_requested"], {"queues": json.dumps(params.queues)})
            open_queues, limited = _split_requested(requested.fetchall())
            jobs = self._claim_open(db, params, open_queues, now)
            look_again = None
            if limited and len(jobs) < params.limit:
                more, look_again = claim_limited(
                    SqliteLimitedIO(db, now), limited, params, params.limit - len(jobs)
                )
                jobs.extend(more)
            unpaused = json.dumps(open_queues + limited)
            after = db.execute(Q["job_next_run_after"], {"queues": unpaused, "now": now})
            next_run_at = after.fetchone()["next_run_at"]
        jobs.sort(key=lambda job: (-job.priority, job.run_at, job.id))
        db_now = micros_to_datetime(now)
        assert db_now is not None
        wakeup = Wakeup(db_now, micros_to_datetime(next_run_at), micros_to_datetime(expiry))
        return Claim(jobs, wakeup.sooner(look_again))

    def _claim_open(
        self, db: sqlite3.Connection, params: JobClaimParams, queues: list[str], now: int
    ) -> list[Job]:
        if params.limit <= 0 or not queues:
            return []
        args = claim_args(now, params)
        jobs: list[Job] = []
        for queue, limit in _shares(db, queues, params.limit, now):
            queue_args = args | {"queue": queue, "limit": limit}
            db.execute(Q["job_skip_expired"], queue_args)
            jobs.extend(claimed_jobs(db, "job_claim_queue", queue_args))
        return jobs

    # -- tiered dispatch (see chronoq.storage.tier) ---------------------------------------

    def job_claim_ids(self, params: JobClaimIdsParams) -> IdClaim:
        refs, unstorable = storable_refs(params.refs)
        pairs = json.dumps([[r.id, r.lease_token] for r in refs])
        with self._write() as db:
            now = _pinned(params.now)  # read under the write lock, as the claim does
            rows = db.execute(Q["job_claim_staged_verdicts"], {"refs": pairs, "now": now})
            verdicts = [(row["id"], row["verdict"], row["run_at"]) for row in rows.fetchall()]
            jobs = self._start_staged(db, params, verdicts, now)
        decoded = [(job_id, kind, micros_to_datetime(run_at)) for job_id, kind, run_at in verdicts]
        db_now = micros_to_datetime(now)
        assert db_now is not None
        return id_claim(db_now, jobs, decoded, unstorable)

    def _start_staged(
        self,
        db: sqlite3.Connection,
        params: JobClaimIdsParams,
        verdicts: list[tuple[int, str, int | None]],
        now: int,
    ) -> list[Job]:
        """Skip the expired misfires and start the others the verdicts allow."""
        skip = [job_id for job_id, verdict, _ in verdicts if verdict == SKIP]
        start = [job_id for job_id, verdict, _ in verdicts if verdict == "start"]
        if skip:
            db.execute(Q["job_skip_ids"], {"ids": json.dumps(skip), "now": now})
        if not start:
            return []
        return claimed_jobs(db, "job_claim_ids", claim_ids_args(start, now, params))

    def job_stage_candidates(self, params: JobStageParams) -> Staging:
        check_stage_params(params)
        with self._read() as db:
            now = _pinned(params.now)
            args = {
                "partitions": json.dumps(sorted(set(params.partitions))),
                "partition_count": params.partition_count,
                "horizon": int(stage_horizon_seconds(params) * 1_000_000),
                "after_id": max(0, min(params.after_id, MAX_ID)),
                "limit": max(0, params.limit),
                "now": now,
            }
            rows = db.execute(Q["job_stage_candidates"], args).fetchall()
        db_now = micros_to_datetime(now)
        assert db_now is not None
        return staging(db_now, rows, micros_to_datetime)

    def job_finish_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        if not params:
            return set()
        if all(
            p.outcome == Outcome.DONE and p.error is None and p.output_json is None for p in params
        ):
            return self._complete_many(params)
        items = [
            {
                "id": p.id,
                "token": p.lease_token,
                "outcome": str(p.outcome),
                "delay": retry_delay(p.retry_delay),
                "error": storable_text(p.error),
                "keep": p.keep_place,
                "output": p.output_json,
            }
            for p in params
        ]
        with self._write() as db:
            rows = db.execute(
                Q["job_finish_many"], {"items": json.dumps(items), "now": now_micros()}
            ).fetchall()
            accepted = {row["id"] for row in rows}
            _count_fence_rejections(db, [(p.id, p.lease_token) for p in params], accepted)
        return accepted

    def _complete_many(self, params: Sequence[JobFinishParams]) -> set[int]:
        pairs = [(p.id, p.lease_token) for p in params]
        with self._write() as db:
            rows = db.execute(
                Q["job_complete_many"], {"refs": json.dumps(pairs), "now": now_micros()}
            ).fetchall()
            accepted = {row[0] for row in rows}
            _count_fence_rejections(db, pairs, accepted)
        return accepted

    def job_complete_in(self, conn: Any, ref: JobLeaseRef, output_json: str | None = None) -> bool:
        args = {"id": ref.id, "token": ref.lease_token, "now": now_micros(), "output": output_json}
        return conn.execute(Q["job_complete_in"], args).fetchone() is not None

    def _fenced_rows(self, query: str, refs: Sequence[JobLeaseRef], **extra: Any) -> list[Any]:
        if not refs:
            return []
        with self._write() as db:
            args = self._refs_args(refs) | {"now": now_micros(), **extra}
            rows: list[Any] = db.execute(Q[query], args).fetchall()
            accepted = {row["id"] for row in rows}
            _count_fence_rejections(db, [(r.id, r.lease_token) for r in refs], accepted)
        return rows

    @staticmethod
    def _refs_args(refs: Sequence[JobLeaseRef]) -> dict[str, Any]:
        return {"refs": json.dumps([[r.id, r.lease_token] for r in refs])}

    def _progress_args(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress]
    ) -> dict[str, Any]:
        beats = [[r.id, r.lease_token, *_progress_pair(progress.get(r.id))] for r in refs]
        return {"beats": json.dumps(beats)}

    def job_next_wakeup(self, queues: Sequence[str]) -> Wakeup:
        with self._read() as db:
            now = now_micros()
            next_run = db.execute(Q["job_next_run_at"], {"queues": json.dumps(list(queues))})
            next_run_at = next_run.fetchone()["next_run_at"]
            next_expiry = db.execute(Q["job_next_lease_expiry"]).fetchone()["next_lease_expiry"]
        db_now = micros_to_datetime(now)
        assert db_now is not None
        return Wakeup(db_now, micros_to_datetime(next_run_at), micros_to_datetime(next_expiry))

    def overview(self, params: OverviewParams) -> Overview:
        now = now_micros()
        db_now = micros_to_datetime(now)
        assert db_now is not None
        since = overview_since(db_now, params)
        args = {
            "since": None if since is None else datetime_to_micros(since),
            "bucket": max(1, int(params.bucket * 1_000_000)),
            "bounds": json.dumps(LATENESS_BOUNDS),
        }
        with self._read() as db:
            queues = db.execute(Q["overview_queues"], {"now": now}).fetchall()
            finished = [] if since is None else db.execute(Q["overview_finished"], args).fetchall()
        return overview_from_rows(db_now, queues, finished, micros_to_datetime)

    # -- schedules: SQLite's upsert cannot tell an insert from an update ---------------

    def schedule_upsert(self, params: ScheduleUpsertParams) -> bool:
        with self._write() as db:
            existed = db.execute(Q["schedule_exists"], {"name": params.name}).fetchone()
            db.execute(Q["schedule_upsert"], schedule_args(params) | {"now": now_micros()})
        return existed is None

    # -- leadership -----------------------------------------------------------------------

    def elector(self, duty: str, holder: str, ttl: float, partitions: int = 1) -> SqliteElector:
        return SqliteElector(self, duty, holder, ttl, partitions)

    def leader_elector(self, duty: str, holder: str, ttl: float) -> SqliteElector:
        warn_leader_elector()
        return self.elector(duty, holder, ttl)

    def leader_attempt(self, duty: str, holder: str, ttl: float) -> LeaderTerm | None:
        now = now_micros()
        args = {
            "duty": duty,
            "holder": holder,
            "now": now,
            "expires_at": now + int(ttl * 1_000_000),
        }
        with self._write() as db:
            row = db.execute(Q["leader_acquire"], args).fetchone()
        return leader_term(row, micros_to_datetime) if row else None

    def leader_forget(self, duty: str, holder: str, term: int) -> None:
        args = {"duty": duty, "holder": holder, "term": term, "now": now_micros()}
        with self._write() as db:
            db.execute(Q["leader_forget"], args)

    def open_listener(self) -> SqliteListener:
        return SqliteListener(self.path)

    def open_finish_listener(self) -> SqliteListener:
        return SqliteListener(self.path)  # any commit: a waiter looks at its job again

    def job_watch(self, job_id: int) -> None:
        """Nothing to mark: the listener signals every commit, a job's end among them."""

    def process_sessions_end(self, params: ProcessSessionsEndParams) -> int:
        """Nothing to end: SQLite has no server sessions. A statement runs inside the process
        that sent it, so it died with that process: what it had not committed never is."""
        return 0

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _job(row: Mapping[str, Any]) -> Job:
    return job_from_json_row(row)


def _schedule(row: Mapping[str, Any]) -> Schedule:
    return schedule_from_row(row, micros_to_datetime, json.loads)


def _shares(
    db: sqlite3.Connection, queues: list[str], limit: int, now: int
) -> list[tuple[str, int]]:
    """How many jobs to claim from each open queue: all `limit` from a lone queue; else as many
    as each has among the first `limit` due jobs of all of them together, in claim order."""
    if len(queues) == 1:
        return [(queues[0], limit)]
    candidates = []
    for queue in queues:
        args = {"queue": queue, "limit": limit, "now": now}
        for priority, run_at, job_id in db.execute(Q["job_due_in_queue"], args):
            candidates.append((-priority, run_at, job_id, queue))
    taken = Counter(queue for *_, queue in heapq.nsmallest(limit, candidates))
    return [(queue, taken[queue]) for queue in queues if taken[queue]]


def _split_requested(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """The unpaused queues asked for: (unlimited, limited)."""
    open_queues: list[str] = []
    limited: list[str] = []
    for row in rows:
        if not row["paused"]:
            (limited if row["limited"] else open_queues).append(row["name"])
    return open_queues, limited


def _pinned(moment: datetime | None) -> int:
    return datetime_to_micros(moment) if moment is not None else now_micros()


def _statements(script: str) -> list[str]:
    """Split a migration into statements, using SQLite's own tokenizer to find their ends."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in pending.splitlines()
    ):
        raise ValueError(f"migration ends with an incomplete statement: {pending.strip()[:80]}")
    return statements


def _translate(exc: sqlite3.OperationalError, path: str) -> Exception:
    if "no such table" in str(exc):
        return SchemaMissing(f"the chronoq tables are missing in {path}: run `chronoq migrate`")
    return StoreUnavailable(f"SQLite database {path} failed: {exc}")


class _LocalCommits:
    """Commits made in this process, announced at once to this process's listeners.

    Other processes' commits are seen through `PRAGMA data_version`, polled every 20 ms; an app
    that enqueues and works in one process (the embedded case) should not wait for that poll.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, set[threading.Event]] = {}

    def subscribe(self, path: str) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._events.setdefault(os.path.realpath(path), set()).add(event)
        return event

    def unsubscribe(self, path: str, event: threading.Event) -> None:
        with self._lock:
            self._events.get(os.path.realpath(path), set()).discard(event)

    def announce(self, real_path: str) -> None:
        """Wake the listeners of the file at `real_path` (resolved by `os.path.realpath`)."""
        with self._lock:
            events = list(self._events.get(real_path, ()))
        for event in events:
            event.set()


_LOCAL_COMMITS = _LocalCommits()


class SqliteListener:
    """Notices commits by any process through `PRAGMA data_version`, which costs no disk read,
    and commits of this process at once."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._db = connect(path)
        self._version = self._read_version()
        self._local = _LOCAL_COMMITS.subscribe(path)

    def _read_version(self) -> int:
        return int(self._db.execute(Q["data_version"]).fetchone()[0])

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            version = self._read_version()
            if self._local.is_set() or version != self._version:
                self._local.clear()
                self._version = version
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._local.wait(min(CHANGE_POLL_SECONDS, remaining))

    def notices(self, timeout: float) -> list[str]:
        return [""] if self.wait(timeout) else []

    def close(self) -> None:
        _LOCAL_COMMITS.unsubscribe(self._path, self._local)
        self._db.close()


def _count_fence_rejections(
    db: sqlite3.Connection, pairs: list[tuple[int, int]], accepted: set[int]
) -> None:
    refused = [[job_id, token] for job_id, token in pairs if job_id not in accepted]
    if refused:
        db.execute(Q["job_fence_rejected"], {"refs": json.dumps(refused)})


def _progress_pair(progress: JobProgress | None) -> tuple[float | None, str | None]:
    return (None, None) if progress is None else (progress.fraction, progress.note)


def _micros(moment: datetime | None) -> int | None:
    return None if moment is None else datetime_to_micros(moment)
