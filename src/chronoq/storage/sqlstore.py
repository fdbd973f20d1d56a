"""What the two SQL stores share: every `JobStore` method whose logic is the same on both.

A method here runs named blocks of the dialect's `.sql` files (`DIALECT_FILES`) with its
arguments encoded by the dialect, and decodes the rows the same way. The stores subclass
`SqlStore` and supply only:

- `Q`, their statements by name;
- how a connection is had: `_read()`, `_write()` (statements each atomic on its own; SQLite takes
  its write lock for the whole block) and `_transaction()` (all of them or none);
- how values travel: `_clock()` (the `now` argument of a statement: SQLite's clock reading,
  nothing on PostgreSQL, which reads its own), `_pinned()`, `_time_arg()`, `_seconds_arg()`,
  `_array()`, and back: `_time()`, `_list()`, `_job()`, `_schedule()`;
- how a migration script runs (`_run_script()`) and is serialised (`_lock_migrations()`);
- the methods that really differ: the claims (SKIP LOCKED against SQLite's write lock), bulk
  inserts (COPY against executemany), finishing and heartbeats (arrays against JSON),
  LISTEN/NOTIFY against `data_version`, and leadership.

A new store method is a block in each dialect's file and, when the dialects differ in how a
value is encoded, a hook above. Arguments a dialect's statement does not name are ignored by
both drivers, so a method passes `now` whether or not PostgreSQL's SQL reads it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any, ClassVar, LiteralString, Protocol

from chronoq.core.fleet import RECENT, Fleet
from chronoq.core.jobs import Job, JobProgress, RescueResult, Stat
from chronoq.core.ratelimit import KeyLimit
from chronoq.core.schedules import Schedule
from chronoq.errors import ConfigError
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    DeadRequeueResult,
    JobHandOffParams,
    JobHeartbeatResult,
    JobInsertParams,
    JobInsertResult,
    JobLeaseRef,
    JobListParams,
    JobPruneParams,
    JobRescueParams,
    LeaderTerm,
    MigrationChange,
    ProcessBeatParams,
    ProcessListParams,
    QueueLimitParams,
    QueueRemoval,
    QueueSettings,
    ScheduleAdvance,
    ScheduleDecision,
    ScheduleDue,
)
from chronoq.storage.rows import (
    heartbeat_result,
    leader_term,
    process_args,
    process_record,
    queue_settings,
    record_args,
    rescue_result,
    stats_from_rows,
    storable_id,
    tick_args,
)
from chronoq.storage.sqlfile import load_down_migrations, load_migrations
from chronoq.storage.tier import check_partition_count

# From here on, keyless jobs enqueued together are stored in bulk: by COPY on PostgreSQL (below
# it, one multi-row INSERT beats setting a COPY up), by one executemany on SQLite.
BULK_THRESHOLD = 64


def goes_in_bulk(jobs: Sequence[JobInsertParams]) -> bool:
    """Whether jobs enqueued together are stored in bulk: BULK_THRESHOLD or more, none keyed."""
    return len(jobs) >= BULK_THRESHOLD and all(job.key is None for job in jobs)


def until_keyed(
    jobs: Iterable[JobInsertParams], keyed: list[JobInsertParams]
) -> Iterator[JobInsertParams]:
    """`jobs` up to the first with a key, which is put in `keyed`: a bulk path that cannot
    store keys hands that job, and the jobs after it, to one that can."""
    for job in jobs:
        if job.key is not None:
            keyed.append(job)
            return
        yield job


class Connection(Protocol):
    """What both drivers' connections answer: one statement with named arguments, returning a
    cursor (`fetchone`, `fetchall`, `rowcount`, iteration)."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class SqlStore(ABC):
    """The shared half of `SqliteStore` and `PostgresStore`."""

    Q: ClassVar[Mapping[str, LiteralString]]
    MIGRATIONS: ClassVar[str]  # the package holding the dialect's migrations/ folder

    # -- dialect hooks: connections ---------------------------------------------------------

    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Connection]: ...

    # -- dialect hooks: values --------------------------------------------------------------

    @abstractmethod
    def _clock(self) -> Any:
        """The `now` argument of a statement that reads the clock."""

    @abstractmethod
    def _pinned(self, moment: datetime | None) -> Any:
        """The `now` argument of a statement a test may pin to `moment`."""

    @abstractmethod
    def _time_arg(self, moment: datetime | None) -> Any: ...

    @abstractmethod
    def _seconds_arg(self, seconds: float) -> Any:
        """A span of time as the dialect adds it to a stored time."""

    @abstractmethod
    def _array(self, values: Sequence[Any]) -> Any: ...

    @abstractmethod
    def _time(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def _list(self, value: Any) -> list[Any]:
        """An array column (or an aggregate) as a list."""

    @abstractmethod
    def _job(self, row: Mapping[str, Any]) -> Job: ...

    @abstractmethod
    def _schedule(self, row: Mapping[str, Any]) -> Schedule: ...

    @abstractmethod
    def _run_script(self, db: Connection, script: LiteralString) -> None: ...

    # -- dialect hooks: fenced writes -------------------------------------------------------

    @abstractmethod
    def _fenced_rows(self, query: str, refs: Sequence[JobLeaseRef], **extra: Any) -> list[Any]:
        """Run `query` over the attempts `refs` name; the rows it returns (one per attempt
        whose token still held), the refused ones counted as fence rejections."""

    @staticmethod
    @abstractmethod
    def _refs_args(refs: Sequence[JobLeaseRef]) -> dict[str, Any]:
        """The arguments naming `refs` (ids and lease tokens) in the dialect's statements."""

    @abstractmethod
    def _progress_args(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress]
    ) -> dict[str, Any]:
        """The arguments carrying each attempt's progress (or none) in a heartbeat."""

    @abstractmethod
    def _lock_migrations(self, db: Connection) -> None:
        """Serialise concurrent migrations (a no-op where the transaction does already)."""

    # -- schema -----------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date)."""
        return self.migrate_to(None).applied

    def migrate_to(self, version: str | None) -> MigrationChange:
        """Bring the schema to `version` (a migration's name or number; None: the newest):
        apply the up migrations up to it, and the down migrations of every applied one after
        it, newest first, all in one transaction."""
        ups = load_migrations(self.MIGRATIONS)
        target = _target_index([name for name, _ in ups], version)
        change = MigrationChange()
        with self._transaction() as db:
            self._lock_migrations(db)
            db.execute(self.Q["migrations_table"])
            done = {row["name"] for row in db.execute(self.Q["migrations_applied"]).fetchall()}
            for name, script in ups[: target + 1]:
                if name not in done:
                    self._run_script(db, script)
                    db.execute(self.Q["migrations_record"], {"name": name, "now": self._clock()})
                    change.applied.append(name)
            downs = load_down_migrations(self.MIGRATIONS)
            for name, _ in reversed(ups[target + 1 :]):
                if name in done:
                    self._run_script(db, downs[name])
                    db.execute(self.Q["migrations_forget"], {"name": name})
                    change.reverted.append(name)
        return change

    # -- enqueue ----------------------------------------------------------------------------

    def job_insert_stream(self, params: Iterable[JobInsertParams]) -> list[JobInsertResult]:
        jobs = iter(params)
        head = list(islice(jobs, BULK_THRESHOLD))
        if not goes_in_bulk(head):
            return self.job_insert_many([*head, *jobs])
        return self._insert_streamed(chain(head, jobs))

    @abstractmethod
    def job_insert_many(
        self, params: Sequence[JobInsertParams], conn: Any = None
    ) -> list[JobInsertResult]: ...

    @abstractmethod
    def _insert_streamed(self, jobs: Iterator[JobInsertParams]) -> list[JobInsertResult]:
        """`job_insert_stream` of at least BULK_THRESHOLD jobs, the first ones keyless: stored
        in bulk as they come, up to the first keyed one (`until_keyed`), which with the jobs
        after it is stored as `job_insert_many` stores a batch with keys, in one transaction."""

    # -- the lease rescuer ------------------------------------------------------------------

    def job_rescue_expired(self, params: JobRescueParams) -> RescueResult:
        args = {"limit": params.limit, "now": self._pinned(params.now)}
        with self._write() as db:
            rows = db.execute(self.Q["job_rescue_expired"], args).fetchall()
        return rescue_result(rows)

    # -- inspection and administration ------------------------------------------------------

    def job_get(self, job_id: int) -> Job | None:
        if not storable_id(job_id):
            return None  # no job has it, and the drivers refuse to send it
        with self._read() as db:
            row = db.execute(self.Q["job_get"], {"id": job_id}).fetchone()
        return self._job(row) if row else None

    def job_list(self, params: JobListParams) -> list[Job]:
        args = {
            "statuses": self._array([str(s) for s in params.statuses]),
            "queue": params.queue,
            "task": params.task,
            "worker": params.worker,
            "key": params.key,
            "created_after": self._time_arg(params.created_after),
            "created_before": self._time_arg(params.created_before),
            "before_id": params.before_id,
            "limit": params.limit,
        }
        with self._read() as db:
            return [self._job(row) for row in db.execute(self.Q["job_list"], args)]

    def job_heartbeat_many(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress] | None = None
    ) -> JobHeartbeatResult:
        extra = self._progress_args(refs, progress or {})
        return heartbeat_result(self._fenced_rows("job_heartbeat_many", refs, **extra))

    def job_cancelled_among(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        if not refs:
            return set()
        with self._read() as db:
            rows = db.execute(self.Q["job_cancelled_among"], self._refs_args(refs)).fetchall()
        return {row["id"] for row in rows}

    def job_release_many(self, refs: Sequence[JobLeaseRef]) -> set[int]:
        return self._fenced_refs("job_release_many", refs)

    def job_hand_off_many(self, params: JobHandOffParams) -> set[int]:
        delay = self._seconds_arg(max(0.0, params.delay))
        return self._fenced_refs("job_hand_off_many", params.refs, delay=delay)

    def _fenced_refs(self, query: str, refs: Sequence[JobLeaseRef], **extra: Any) -> set[int]:
        return {row["id"] for row in self._fenced_rows(query, refs, **extra)}

    def job_cancel(self, job_id: int) -> Job | None:
        """Cancel a pending or running job; return the job as it now is (None: no such id)."""
        if not storable_id(job_id):
            return None
        with self._write() as db:
            args = {"id": job_id, "now": self._clock()}
            row = db.execute(self.Q["job_cancel"], args).fetchone()
            if row is None:
                row = db.execute(self.Q["job_get"], {"id": job_id}).fetchone()
        return self._job(row) if row else None

    def dead_requeue(self, params: DeadRequeueParams) -> DeadRequeueResult:
        args = self._dead_selection(params.ids, params.queue, params.task)
        given = set(params.ids or ())
        with self._transaction() as db:
            wanted = {row["id"] for row in db.execute(self.Q["dead_ids"], args).fetchall()}
            requeued = {row["id"] for row in db.execute(self.Q["dead_requeue"], args).fetchall()}
            # In the same transaction, so a job purged meanwhile is not called "not dead".
            found = self._existing_ids(db, args) if given else set()
        return DeadRequeueResult(
            requeued=sorted(requeued),
            key_conflicts=sorted(wanted - requeued),
            not_dead=sorted(found - wanted),
            not_found=sorted(given - found),
        )

    def _existing_ids(self, db: Connection, args: Mapping[str, Any]) -> set[int]:
        return {row["id"] for row in db.execute(self.Q["job_ids_existing"], args).fetchall()}

    def dead_purge(self, params: DeadPurgeParams) -> int:
        args = self._dead_selection(params.ids, params.queue, params.task)
        args["older_than"] = self._seconds_arg(params.older_than.total_seconds())
        with self._write() as db:
            return int(db.execute(self.Q["dead_purge"], args).rowcount)

    def _dead_selection(
        self, ids: Sequence[int] | None, queue: str | None, task: str | None
    ) -> dict[str, Any]:
        """The dead jobs a requeue or purge names: ids no job can have are left out."""
        return {
            "all": ids is None,
            "ids": self._array([job_id for job_id in ids or [] if storable_id(job_id)]),
            "queue": queue,
            "task": task,
            "now": self._clock(),
        }

    def stats(self) -> list[Stat]:
        with self._read() as db:
            rows = db.execute(self.Q["stats"]).fetchall()
        return stats_from_rows(rows)

    def job_prune(self, params: JobPruneParams) -> int:
        """Delete up to `limit` old finished jobs, key buckets that have refilled, and the
        records of keys whose period has passed."""
        args = {
            "older_than": self._seconds_arg(params.older_than.total_seconds()),
            "limit": params.limit,
            "now": self._clock(),
        }
        with self._write() as db:
            deleted = int(db.execute(self.Q["job_prune"], args).rowcount)
            db.execute(self.Q["unique_keys_prune"], args)
            db.execute(self.Q["key_buckets_prune"], args)
            db.execute(self.Q["key_buckets_orphans_prune"], args)
        return deleted

    # -- queues -----------------------------------------------------------------------------

    def queue_list(self) -> list[QueueSettings]:
        with self._read() as db:
            rows = db.execute(self.Q["queue_list"], {"name": None}).fetchall()
        return [queue_settings(row) for row in rows]

    def queue_get(self, name: str) -> QueueSettings:
        with self._read() as db:
            row = db.execute(self.Q["queue_list"], {"name": name}).fetchone()
        return queue_settings(row) if row else QueueSettings(name)

    def queue_pause(self, name: str, paused: bool) -> QueueSettings:
        with self._write() as db:
            args = {"name": name, "paused": paused, "now": self._clock()}
            db.execute(self.Q["queue_pause"], args)
        return self.queue_get(name)

    def queue_limit(self, params: QueueLimitParams) -> QueueSettings:
        args = {
            "name": params.name,
            "rate": params.rate,
            "burst": params.burst if params.rate is not None else None,
            "concurrency": params.concurrency,
            "now": self._clock(),
        }
        with self._write() as db:
            db.execute(self.Q["queue_limit"], args)
        return self.queue_get(params.name)

    def key_limit_set(self, queue: str, limit: KeyLimit) -> QueueSettings:
        args = {"queue": queue, "pattern": limit.pattern, "rate": limit.rate, "burst": limit.burst}
        with self._transaction() as db:
            db.execute(self.Q["queue_ensure"], {"name": queue, "now": self._clock()})
            db.execute(self.Q["key_limit_set"], args)
        return self.queue_get(queue)

    def key_limit_remove(self, queue: str, pattern: str) -> bool:
        with self._write() as db:
            args = {"queue": queue, "pattern": pattern}
            return int(db.execute(self.Q["key_limit_remove"], args).rowcount) > 0

    def queue_names(self) -> list[str]:
        with self._read() as db:
            return [row["name"] for row in db.execute(self.Q["queue_names"]).fetchall()]

    def queue_remove(self, name: str) -> QueueRemoval:
        args = {"name": name}
        with self._transaction() as db:
            live = db.execute(self.Q["queue_live_counts"], args).fetchone()
            pending, running = int(live["pending"]), int(live["running"])
            if pending or running:
                return QueueRemoval(name, removed=False, pending=pending, running=running)
            removed = int(db.execute(self.Q["queue_remove"], args).rowcount) > 0
            db.execute(self.Q["queue_key_limits_remove"], args)
            db.execute(self.Q["queue_key_buckets_remove"], args)
        return QueueRemoval(name, removed=removed)

    # -- schedules --------------------------------------------------------------------------

    def schedule_get(self, name: str) -> Schedule | None:
        with self._read() as db:
            row = db.execute(self.Q["schedule_get"], {"name": name}).fetchone()
        return self._schedule(row) if row else None

    def schedule_list(self) -> list[Schedule]:
        with self._read() as db:
            return [self._schedule(row) for row in db.execute(self.Q["schedule_list"])]

    def schedule_pause(self, name: str, paused: bool) -> Schedule | None:
        """Pause: its tick jobs not yet due are cancelled. Resume: the cursor moves to now,
        so ticks that fell in the pause are not treated as missed."""
        with self._transaction() as db:
            now = self._clock()
            args = {"name": name, "paused": paused, "now": now}
            row = db.execute(self.Q["schedule_pause"], args).fetchone()
            if row is not None and paused:
                ahead = {"name": name, "all": False, "now": now}
                db.execute(self.Q["schedule_cancel_ahead"], ahead)
        return self._schedule(row) if row else None

    def schedule_remove(self, name: str) -> bool:
        """Delete the schedule and cancel its pending tick jobs."""
        with self._transaction() as db:
            removed = db.execute(self.Q["schedule_remove"], {"name": name}).fetchone() is not None
            if removed:
                ahead = {"name": name, "all": True, "now": self._clock()}
                db.execute(self.Q["schedule_cancel_ahead"], ahead)
        return removed

    def schedule_due(self, lookahead: timedelta) -> ScheduleDue:
        args = {"lookahead": self._seconds_arg(lookahead.total_seconds()), "now": self._clock()}
        with self._read() as db:
            row = db.execute(self.Q["schedule_due"], args).fetchone()
        db_now = self._time(row["db_now"])
        assert db_now is not None
        return ScheduleDue(self._list(row["names"]), self._time(row["next_tick"]), db_now)

    def schedule_advance(self, name: str, decide: ScheduleDecision) -> ScheduleAdvance | None:
        """Lock the schedule, let `decide` plan the pass on the database clock, then insert its
        jobs and store its cursor and counters, all in one transaction. None: the schedule is
        gone or paused, or `decide` had nothing to do."""
        with self._transaction() as db:
            now = self._clock()
            row = db.execute(self.Q["schedule_lock"], {"name": name, "now": now}).fetchone()
            if row is None:
                return None
            db_now = self._time(row["db_now"])
            assert db_now is not None
            advance = decide(self._schedule(row), db_now)
            if advance is None:
                return None
            for job in advance.jobs:
                args = tick_args(job, self._time_arg) | {"now": now}
                advance.inserted += (
                    db.execute(self.Q["job_insert_tick"], args).fetchone() is not None
                )
            record = record_args(name, advance, self._time_arg) | {"now": now}
            db.execute(self.Q["schedule_record"], record)
        return advance

    # -- tiered dispatch --------------------------------------------------------------------

    def tier_partitions(self, requested: int) -> int:
        """The partition count of tiered dispatch: `requested` at the first call on a database,
        the count recorded then at every later call."""
        check_partition_count(requested)
        with self._write() as db:
            # Two statements, each its own transaction on PostgreSQL: the read must see what a
            # concurrent first call committed while the insert waited for it (see tier_record).
            db.execute(self.Q["tier_record"], {"partitions": requested, "now": self._clock()})
            row = db.execute(self.Q["tier_get"]).fetchone()
        return int(row["partitions"])

    # -- the fleet registry -----------------------------------------------------------------

    def process_beat(self, params: ProcessBeatParams) -> None:
        args = process_args(params.info) | {
            "ttl": self._seconds_arg(params.ttl),
            "now": self._pinned(params.now),
        }
        with self._write() as db:
            db.execute(self.Q["process_beat"], args)

    def process_stop(self, process_id: str, now: datetime | None = None) -> bool:
        args = {"id": process_id, "now": self._pinned(now)}
        with self._write() as db:
            return int(db.execute(self.Q["process_stop"], args).rowcount) > 0

    def process_list(self, params: ProcessListParams) -> Fleet:
        args = {
            "all": params.all,
            "recent": self._seconds_arg(params.recent.total_seconds()),
            "now": self._pinned(params.now),
        }
        with self._read() as db:
            rows = db.execute(self.Q["process_list"], args).fetchall()
        db_now = self._time(rows[0]["db_now"])
        assert db_now is not None
        records = [process_record(row, self._time, self._list) for row in rows if row["id"]]
        return Fleet(records, db_now)

    def process_prune(self, recent: timedelta = RECENT) -> int:
        args = {"recent": self._seconds_arg(recent.total_seconds()), "now": self._clock()}
        with self._write() as db:
            return int(db.execute(self.Q["process_prune"], args).rowcount)

    # -- leadership -------------------------------------------------------------------------

    def leader_get(self, duty: str) -> LeaderTerm | None:
        with self._read() as db:
            row = db.execute(self.Q["leader_get"], {"duty": duty}).fetchone()
        return leader_term(row, self._time) if row else None

    def leader_list(self, duties: Sequence[str]) -> list[LeaderTerm]:
        """The unexpired terms among the records `duties` names (chronoq.coordination)."""
        args = {"duties": self._array(duties), "now": self._clock()}
        with self._read() as db:
            rows = db.execute(self.Q["leader_list"], args).fetchall()
        return [leader_term(row, self._time) for row in rows]


def _target_index(names: Sequence[str], version: str | None) -> int:
    """The position of the migration `version` names (its full name, or its number)."""
    if version is None:
        return len(names) - 1
    for index, name in enumerate(names):
        if version in (name, name.split("_", 1)[0]) or _same_number(version, name):
            return index
    raise ConfigError(
        f"unknown migration version {version!r}: known versions are {', '.join(names)}"
    )


def _same_number(version: str, name: str) -> bool:
    number = name.split("_", 1)[0]
    return version.isascii() and version.isdigit() and int(version) == int(number)
