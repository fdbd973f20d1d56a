"""What every hostile-input test shares: an arena of stored rows, and the checks around it.

An `Arena` is an App on the test's store with a few rows put there first (jobs whose names,
keys and payloads are hostile but legal, a dead job, a schedule, queue and key limits). A test
feeds one hostile input, then asserts either that it was refused with chronoq's own error and
nothing stored changed (`assert_unharmed`), or that it was accepted without disturbing what was
there (`assert_seeds_intact`). Both end by enqueuing and claiming a job, so a store left broken
by the input fails the test too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from chronoq import App, ChronoqError, JobSpec, Outcome
from chronoq.fleet.records import PayloadParam, ProcessInfo, TaskInfo
from chronoq.scheduling import key_limit, queue_limit_params
from chronoq.storage.base import (
    JobClaimParams,
    JobFinishParams,
    JobInsertParams,
    JobListParams,
    JobStore,
    ProcessBeatParams,
    QueueSettings,
)
from tests.integration.cli_support import Result

PROBE_QUEUE = "hostile-probe"
SQL = "x'); DROP TABLE chronoq_jobs; --"
HTML = "<script>alert(1)</script>"
SEED_TASK = SQL
SEED_QUEUE = "q'\"<b>"
SEED_KEY = "🎉 ключ ' OR '1'='1"
SEED_SCHEDULE = "seed-schedule"
SEED_LIMITED = "seed-limited"
SEED_PATTERN = "tenant:*"
# A worker the fleet registry knows, which runs the task "t" that the commands enqueue (a
# producer without the handlers' code refuses tasks no worker knows), taking any payload.
SEED_WORKER = ProcessInfo(
    id="seed:0:0",
    kind="worker",
    host="seed",
    pid=1,
    version="0",
    queues=("default",),
    tasks=(
        TaskInfo(
            name="t",
            queue="default",
            priority=0,
            max_attempts=20,
            lease=60.0,
            timeout=None,
            misfire="run_late",
            misfire_grace=None,
            params=(PayloadParam("payload", "var_keyword", required=False),),
        ),
    ),
)


@dataclass(frozen=True)
class Snapshot:
    jobs: list[dict[str, Any]]
    schedules: dict[str, dict[str, Any]]
    queues: dict[str, QueueSettings]


@dataclass
class Arena:
    """An App on the test's store, and what was stored in it before the hostile input."""

    app: App
    dsn: str
    before: Snapshot
    dead_id: int
    checker: JobStore | None = None  # a store to look with; else the app's

    @property
    def store(self) -> JobStore:
        return self.checker or self.app.store

    def snapshot(self) -> Snapshot:
        store = self.store
        jobs = store.job_list(JobListParams(limit=10_000))
        return Snapshot(
            jobs=sorted(
                (job.to_json() for job in jobs if job.queue != PROBE_QUEUE),
                key=lambda job: job["id"],
            ),
            schedules={s.name: s.to_json() for s in store.schedule_list()},
            queues={q.name: q for q in store.queue_list() if q.name != PROBE_QUEUE},
        )

    def assert_unharmed(self) -> None:
        """Nothing stored changed, and the store still enqueues and claims."""
        assert self.snapshot() == self.before
        self.assert_works()

    def assert_seeds_intact(self) -> Snapshot:
        """What was stored before is still there, unchanged; the store still works. Returns
        the snapshot, for the test to look at what the accepted input added."""
        now = self.snapshot()
        assert now.jobs[: len(self.before.jobs)] == self.before.jobs
        for name, schedule in self.before.schedules.items():
            # A scheduler pass moves a schedule's cursor and counters, not its definition.
            assert _definition(now.schedules.get(name)) == _definition(schedule)
        for name, queue in self.before.queues.items():
            assert now.queues.get(name) == queue
        self.assert_works()
        return now

    def assert_works(self) -> None:
        """Enqueue a job and claim it back (on a queue of its own, left out of snapshots)."""
        store = self.store
        [probe] = store.job_insert_many([JobInsertParams(PROBE_QUEUE, "probe", "{}")])
        claimed = store.job_claim_with_wakeup(JobClaimParams([PROBE_QUEUE], 1, "hostile:0:0")).jobs
        assert [job.id for job in claimed] == [probe.id]

    def new_rows(self) -> list[dict[str, Any]]:
        """Jobs stored since the arena was set up."""
        return self.snapshot().jobs[len(self.before.jobs) :]


_SCHEDULE_DEFINITION = (
    "name",
    "cadence",
    "zone",
    "task",
    "payload",
    "queue",
    "priority",
    "misfire",
    "misfire_grace",
    "catch_up",
    "jitter",
    "paused",
    "origin",
)


def _definition(schedule: dict[str, Any] | None) -> dict[str, Any] | None:
    if schedule is None:
        return None
    return {field: schedule[field] for field in _SCHEDULE_DEFINITION}


def seed(app: App) -> int:
    """Store the arena's rows through the API; returns the id of the dead job."""
    store = app.store
    app.enqueue_many(
        [
            JobSpec("seed_plain", {"n": 1}),
            JobSpec(SEED_TASK, {"html": HTML, "quote": "'\""}, queue=SEED_QUEUE, key=SEED_KEY),
            JobSpec("seed_later", {"emoji": "🎉"}, delay="1h", priority=5, rate_key="tenant:1"),
        ]
    )
    [dead] = store.job_insert_many([JobInsertParams("seed-dead", "seed_dead", "{}")])
    [claimed] = store.job_claim_with_wakeup(JobClaimParams(["seed-dead"], 1, "seed:0:0")).jobs
    error = {"attempt": 1, "error": "ValueError", "message": "seeded"}
    store.job_finish_many([JobFinishParams(dead.id, claimed.lease_token, Outcome.DEAD, 0, error)])
    # Midnight of 29 February: a scheduler pass in a test does not fire it.
    schedule = app.schedule_spec(name=SEED_SCHEDULE, cadence="0 0 29 2 *", task="seed_plain")
    app.add_schedule(schedule)
    store.queue_limit(queue_limit_params(SEED_LIMITED, "10/s", None, 5))
    store.key_limit_set(SEED_LIMITED, key_limit(SEED_PATTERN, "1/s", None))
    store.process_beat(ProcessBeatParams(SEED_WORKER, ttl=86_400))
    return dead.id


@dataclass(frozen=True)
class Seeds:
    """What `seed` stored, as the arena of every test starts with it."""

    snapshot: Snapshot
    dead_id: int


def seeded(dsn: str) -> Seeds:
    with App(dsn) as app:
        dead_id = seed(app)
        arena = Arena(app, dsn, Snapshot([], {}, {}), dead_id)
        return Seeds(arena.snapshot(), dead_id)


@contextmanager
def refused(error: type[ChronoqError], match: str) -> Iterator[pytest.ExceptionInfo[Any]]:
    """Expect chronoq's `error` (exactly that class or a subclass) with `match` in its message.
    Anything else raised, a raw driver error above all, fails the test as it is."""
    with pytest.raises(error) as caught:
        yield caught
    assert re.search(match, str(caught.value)), f"{match!r} not in {str(caught.value)!r}"


def assert_usage_error(result: Result, match: str) -> None:
    """A refused command: exit 2, one line on stderr naming the problem, nothing on stdout."""
    assert result.code == 2, result
    assert "Traceback" not in result.err
    assert result.out == "", result
    assert result.err.startswith("error: "), result.err
    assert result.err.count("\n") == 1, result.err
    assert re.search(match, result.err), f"{match!r} not in {result.err!r}"


def assert_failure(result: Result, match: str) -> None:
    """A command that could not do it (exit 1, one line), for look-ups of names that do not
    exist: a hostile name finds nothing and changes nothing."""
    assert result.code == 1, result
    assert "Traceback" not in result.err
    assert result.err.startswith("error: "), result.err
    assert result.err.count("\n") == 1, result.err
    assert re.search(match, result.err), f"{match!r} not in {result.err!r}"
