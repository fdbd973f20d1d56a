"""The job state machine, driven at random over a real store and checked against a model.

Rules enqueue (now or an hour out, with or without a key), claim (now, or on a clock pinned two
hours ahead), heartbeat, finish with each outcome and release (each with the current token or a
stale or future one), rescue expired leases (on a clock pinned ten hours ahead, past every
lease), cancel and requeue. After every step each row must match the model, and:

- every change of status is an edge of the job lifecycle (the architecture document);
- a write with a token other than the current one changes nothing;
- attempts stay between 0 and max_attempts;
- a final job (done, cancelled, dead) never changes, except a dead one through requeue and a job
  cancelled while it ran, whose attempt may still record its cancelled end;
- a key is held by at most one live (pending or running) job.

Finishing follows the worker's protocol: a failed last attempt is reported dead, not retry.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.storage.base import (
    DeadRequeueParams,
    JobClaimParams,
    JobFinishParams,
    JobInsertParams,
    JobLeaseRef,
    JobListParams,
    JobRescueParams,
    JobStore,
)
from chronoq.storage.postgres.store import PostgresStore
from chronoq.storage.sqlite.store import SqliteStore

PENDING, RUNNING, DONE, DEAD, CANCELLED = (
    JobStatus.PENDING,
    JobStatus.RUNNING,
    JobStatus.DONE,
    JobStatus.DEAD,
    JobStatus.CANCELLED,
)
LIVE = frozenset({PENDING, RUNNING})
EDGES = frozenset(
    {
        (PENDING, RUNNING),  # claim
        (PENDING, CANCELLED),  # cancel
        (RUNNING, PENDING),  # retry, release, rescue
        (RUNNING, DONE),
        (RUNNING, DEAD),  # last attempt failed, or its lease expired
        (RUNNING, CANCELLED),  # discard, or cancel
        (DEAD, PENDING),  # requeue
    }
)
AFTER_FINISH = {
    Outcome.DONE: DONE,
    Outcome.RETRY: PENDING,
    Outcome.DEAD: DEAD,
    Outcome.CANCELLED: CANCELLED,
}
QUEUE = "model"
KEYS = st.sampled_from([None, None, "k1", "k2", "k 'three'"])
TOKEN_SHIFTS = st.sampled_from([0, 0, 0, -1, 1])  # the current token, mostly
LATER = st.sampled_from([False, False, False, True])  # due now, mostly
OUTCOMES = st.sampled_from(list(Outcome))


@dataclass
class Expected:
    """What the model knows of one job."""

    status: JobStatus
    attempts: int
    token: int
    max_attempts: int
    key: str | None
    later: bool  # due an hour from now: only a claim on a clock pinned ahead takes it
    # Cancelled while (or as) its last attempt ran: that attempt's heartbeat hears of it, and
    # it may still record a cancelled end.
    cancelled_running: bool = False


class JobStates(RuleBasedStateMachine):
    store: JobStore
    clear: Callable[[], None]
    jobs_made = Bundle("jobs")
    jobs_claimed = Bundle("claimed")  # jobs claimed at some point: the targets of worker writes

    def __init__(self) -> None:
        super().__init__()
        type(self).clear()
        self.jobs: dict[int, Expected] = {}
        self.rows: dict[int, Job] = {}

    # -- rules ----------------------------------------------------------------------------

    @rule(target=jobs_made, later=LATER, key=KEYS, max_attempts=st.sampled_from([1, 1, 2, 3]))
    def enqueue(self, later: bool, key: str | None, max_attempts: int) -> int:
        job = JobInsertParams(
            QUEUE, "t", "{}", delay_seconds=3600.0 * later, max_attempts=max_attempts, key=key
        )
        [result] = self.store.job_insert_many([job])
        holder = next(
            (i for i, e in self.jobs.items() if key and e.key == key and e.status in LIVE), None
        )
        if holder is not None:
            assert (result.id, result.created) == (holder, False)
        else:
            assert result.created and result.id not in self.jobs
            self.jobs[result.id] = Expected(PENDING, 0, 0, max_attempts, key, later)
        return result.id

    @precondition(lambda self: any(e.status is PENDING for e in self.jobs.values()))
    @rule(target=jobs_claimed, limit=st.integers(1, 3), ahead=LATER)
    def claim(self, limit: int, ahead: bool) -> MultipleResults[int]:
        now = self.store.db_now() + timedelta(hours=2) if ahead else None
        claimed = self.store.job_claim_with_wakeup(
            JobClaimParams([QUEUE], limit, "model:1:1", now)
        ).jobs
        due = {i for i, e in self.jobs.items() if e.status is PENDING and (ahead or not e.later)}
        assert len(claimed) == min(limit, len(due))
        for job in claimed:
            assert job.id in due
            expected = self.jobs[job.id]
            expected.status, expected.attempts = RUNNING, expected.attempts + 1
            expected.token += 1
            assert (job.attempts, job.lease_token) == (expected.attempts, expected.token)
        return multiple(*(job.id for job in claimed))

    @rule(job=jobs_claimed, shift=TOKEN_SHIFTS)
    def heartbeat(self, job: int, shift: int) -> None:
        expected = self.jobs[job]
        kept = self.store.job_heartbeat_many([JobLeaseRef(job, expected.token + shift)])
        assert kept.renewed == ({job} if self._owned(expected, shift) else set())
        cancelled = expected.cancelled_running and shift == 0
        assert kept.cancelled == ({job} if cancelled else set())

    @precondition(lambda self: self._running())
    @rule(data=st.data(), outcome=OUTCOMES, later=LATER)
    def work(self, data: st.DataObject, outcome: Outcome, later: bool) -> None:
        """A worker reports on a job it holds."""
        self.finish(data.draw(st.sampled_from(self._running())), outcome, 0, later)

    @rule(job=jobs_claimed, outcome=OUTCOMES, shift=TOKEN_SHIFTS, later=LATER)
    def finish(self, job: int, outcome: Outcome, shift: int, later: bool) -> None:
        """A report on any job ever claimed, with any token: most are stale."""
        expected = self.jobs[job]
        if outcome is Outcome.RETRY and expected.attempts >= expected.max_attempts:
            outcome = Outcome.DEAD
        error = {"error": "ValueError", "message": f"attempt {expected.attempts}"}
        report = JobFinishParams(job, expected.token + shift, outcome, 3600.0 * later, error)
        accepted = self.store.job_finish_many([report])
        owned = self._owned(expected, shift)
        recorded = expected.cancelled_running and shift == 0 and outcome is Outcome.CANCELLED
        assert accepted == ({job} if owned or recorded else set())
        if owned:
            expected.status = AFTER_FINISH[outcome]
            # The store cannot tell a cancelled end from a cancel while the attempt ran.
            expected.cancelled_running = outcome is Outcome.CANCELLED
            expected.later = later if outcome is Outcome.RETRY else expected.later

    @rule(job=jobs_claimed, shift=TOKEN_SHIFTS)
    def release(self, job: int, shift: int) -> None:
        expected = self.jobs[job]
        released = self.store.job_release_many([JobLeaseRef(job, expected.token + shift)])
        owned = self._owned(expected, shift)
        assert released == ({job} if owned else set())
        if owned:
            expected.status, expected.attempts = PENDING, expected.attempts - 1

    @precondition(lambda self: self._running())
    @rule()
    def rescue(self) -> None:
        now = self.store.db_now() + timedelta(hours=10)
        result = self.store.job_rescue_expired(JobRescueParams(now=now))
        running = {i: e for i, e in self.jobs.items() if e.status is RUNNING}
        last = {i for i, e in running.items() if e.attempts >= e.max_attempts}
        assert (set(result.dead), set(result.requeued)) == (last, set(running) - last)
        for i, expected in running.items():
            expected.status = DEAD if i in last else PENDING

    @rule(job=jobs_made)
    def cancel(self, job: int) -> None:
        expected = self.jobs[job]
        row = self.store.job_cancel(job)
        if expected.status in LIVE:
            expected.cancelled_running = expected.status is RUNNING
            expected.status = CANCELLED
        assert row is not None and row.status is expected.status

    @precondition(lambda self: any(e.status is DEAD for e in self.jobs.values()))
    @rule(jobs=st.one_of(st.none(), st.lists(jobs_made, max_size=3)))
    def requeue(self, jobs: list[int] | None) -> None:
        result = self.store.dead_requeue(DeadRequeueParams(ids=jobs))
        chosen = set(self.jobs) if jobs is None else set(jobs)
        dead = {i for i in chosen if self.jobs[i].status is DEAD}
        live_keys = {e.key for e in self.jobs.values() if e.status in LIVE and e.key}
        groups: dict[Any, list[int]] = {}
        for i in dead:
            key = self.jobs[i].key
            groups.setdefault(key if key is not None else ("id", i), []).append(i)
        requeued = {max(ids) for key, ids in groups.items() if key not in live_keys}
        assert (result.requeued, result.key_conflicts) == (
            sorted(requeued),
            sorted(dead - requeued),
        )
        for i in requeued:
            expected = self.jobs[i]
            expected.status, expected.attempts, expected.later = PENDING, 0, False

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def rows_are_what_the_model_says(self) -> None:
        rows = {job.id: job for job in self.store.job_list(JobListParams(limit=10_000))}
        assert set(rows) == set(self.jobs)
        live_keys: Counter[str] = Counter()
        for job_id, row in rows.items():
            expected = self.jobs[job_id]
            assert (row.status, row.attempts, row.lease_token) == (
                expected.status,
                expected.attempts,
                expected.token,
            )
            assert (row.max_attempts, row.key) == (expected.max_attempts, expected.key)
            assert 0 <= row.attempts <= expected.max_attempts
            assert (row.locked_until is not None) == (row.status is RUNNING)
            before = self.rows.get(job_id)
            if before is not None and before.status is not row.status:
                assert (before.status, row.status) in EDGES
            if before is not None and before.status.is_final and before.status is row.status:
                # A final job never changes, but for counting the stale writes it refuses.
                assert row.fence_rejections >= before.fence_rejections
                unchanged = dataclasses.replace(row, fence_rejections=before.fence_rejections)
                if expected.cancelled_running:
                    # ... and for the end its cancelled attempt records in the history.
                    assert row.errors[: len(before.errors)] == before.errors
                    unchanged = dataclasses.replace(unchanged, errors=before.errors)
                assert unchanged == before
            if row.status in LIVE and row.key is not None:
                live_keys[row.key] += 1
        assert all(count == 1 for count in live_keys.values()), live_keys
        self.rows = rows

    def _running(self) -> list[int]:
        return sorted(i for i, e in self.jobs.items() if e.status is RUNNING)

    def _owned(self, expected: Expected, shift: int) -> bool:
        """Would a write with this token be applied? Only the current token of a running job."""
        return expected.status is RUNNING and shift == 0


STATES = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@contextmanager
def _emptier(store: SqliteStore | PostgresStore) -> Iterator[Callable[[], None]]:
    """Something that empties the jobs table between examples, on a connection of its own."""
    if isinstance(store, SqliteStore):

        def empty_sqlite() -> None:
            with closing(sqlite3.connect(store.path)) as conn, conn:
                conn.execute("DELETE FROM chronoq_jobs")

        yield empty_sqlite
        return
    with psycopg.connect(store.dsn, autocommit=True) as conn:

        def empty_postgres() -> None:
            conn.execute("DELETE FROM chronoq_jobs")

        yield empty_postgres


def test_jobs_move_only_along_the_state_machine(store: SqliteStore | PostgresStore) -> None:
    with _emptier(store) as empty:
        machine = type(
            "JobStatesOnThisStore", (JobStates,), {"store": store, "clear": staticmethod(empty)}
        )
        run_state_machine_as_test(machine, settings=STATES)
