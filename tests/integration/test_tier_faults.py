"""Faults of a partition leader, each driven turn by turn on a clock the test moves: real
PostgreSQL and Redis, leadership from a scripted elector (our own port), so that trust windows
can lapse between two turns exactly where a fault needs them to."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from chronoq import App, JobStatus, WorkerOptions
from chronoq.coordination.base import Leadership, PartitionLeader
from chronoq.observability.events import Observers, PartitionLeaderChanged, Subscription
from chronoq.tier.dbclock import due_ms
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.partitions import NEXT_IN_REDIS
from chronoq.tier.ports import Moved, Takeover, Timer
from chronoq.tier.redis import RedisTimerStore, connect
from chronoq.tier.redis.keys import partition_keys
from tests.helpers import running_worker, wait_until
from tests.services.tier import PARTITIONS, leading, tiered_app


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class ScriptedElector:
    """Grants what the test sets, trusted until `trust` seconds after each step."""

    clock: Clock
    holder: str = "scripted"
    partitions: int = PARTITIONS
    trust: float = 2.0
    epochs: dict[int, int] = field(default_factory=dict)
    trust_of: dict[int, float] = field(default_factory=dict)  # a partition's own, if set
    answering: bool = True

    def step(self) -> dict[int, Leadership]:
        if not self.answering:
            return {}
        now = self.clock()
        return {
            p: Leadership(p, e, now + self.trust_of.get(p, self.trust))
            for p, e in sorted(self.epochs.items())
        }

    def leaders(self) -> list[PartitionLeader]:
        return [PartitionLeader(p, self.holder, e) for p, e in sorted(self.epochs.items())]

    def members(self) -> list[str]:
        return [self.holder]

    def close(self) -> None:
        self.epochs.clear()


@dataclass
class Recorded:
    """The leader's calls to its timer store, counted (the store itself is real Redis)."""

    store: RedisTimerStore
    take_overs: list[tuple[int, int, bool]] = field(default_factory=list)
    moves: list[Moved] = field(default_factory=list)
    waiting_asked: int = 0

    def install(self) -> None:
        take_over, move_due, waiting = (
            self.store.take_over,
            self.store.move_due,
            self.store.waiting,
        )

        def recorded_take_over(partition: int, epoch: int, *, force: bool = False) -> Takeover:
            self.take_overs.append((partition, epoch, force))
            return take_over(partition, epoch, force=force)

        def recorded_move(partition: int, epoch: int, now_ms: int, limit: int) -> Moved:
            moved = move_due(partition, epoch, now_ms, limit)
            self.moves.append(moved)
            return moved

        def recorded_waiting(partition: int, entries: Any) -> Any:
            self.waiting_asked += 1
            return waiting(partition, entries)

        self.store.take_over = recorded_take_over  # type: ignore[method-assign]
        self.store.move_due = recorded_move  # type: ignore[method-assign]
        self.store.waiting = recorded_waiting  # type: ignore[method-assign]


@dataclass
class LeaderChanges:
    """An observer of the leader's PartitionLeaderChanged events."""

    seen: list[PartitionLeaderChanged] = field(default_factory=list)

    def subscriptions(self) -> list[Subscription[Any]]:
        return [Subscription(PartitionLeaderChanged, self.seen.append)]


@dataclass
class Rig:
    app: App
    clock: Clock
    elector: ScriptedElector
    timers: RedisTimerStore
    calls: Recorded
    leader: TierLeader
    changes: list[PartitionLeaderChanged]

    def turn(self, seconds: float = 0.0) -> None:
        """Move the clock, step the elector, stage, and run one turn of the mover."""
        self.clock.advance(seconds)
        self.leader.run_once()
        self.leader.stage_once()
        self.leader.run_once()

    def stream_length(self, partition: int, queue: str = "default") -> int:
        stream = partition_keys(self.app.config.redis_prefix, partition).stream(queue)
        return int(self.timers.client.xlen(stream))

    def moved(self) -> int:
        return sum(m.moved for m in self.calls.moves)


def make_rig(app: App, redis_url: str, **options: Any) -> Rig:
    clock = Clock()
    elector = ScriptedElector(clock)
    timers = RedisTimerStore(connect(redis_url), prefix=app.config.redis_prefix)
    calls = Recorded(timers)
    calls.install()
    changes = LeaderChanges()
    settings = {"partitions": PARTITIONS, "horizon": 30.0, "step_interval": 0.5, **options}
    leader = TierLeader(
        app.runtime(),
        elector,
        timers,
        TierOptions(**settings),
        Observers([changes]),
        monotonic=clock,
    )
    return Rig(app, clock, elector, timers, calls, leader, changes.seen)


@pytest.fixture
def app(pg_dsn: str, redis_url: str, redis_prefix: str) -> Iterator[App]:
    opened = tiered_app(pg_dsn, redis_url, redis_prefix)

    @opened.task()
    def noop() -> None:
        return None

    yield opened
    opened.close()


@pytest.fixture
def rig(app: App, redis_url: str) -> Iterator[Rig]:
    made = make_rig(app, redis_url)
    yield made
    made.timers.close()


def job_in_partition(app: App, partition: int, **enqueue: Any) -> int:
    """Enqueue no-op jobs until one lands in `partition` (a job's partition is its id modulo
    the count); the others are cancelled."""
    while True:
        job = app.enqueue("noop", {}, **enqueue)
        if job.id % PARTITIONS == partition:
            return job.id
        app.admin.cancel_job(job.id)


# -- C1: a bad row is confined to itself ----------------------------------------------------


def test_a_moment_before_1970_is_due_now() -> None:
    assert due_ms(datetime(1960, 1, 1, tzinfo=UTC)) == 0
    assert due_ms(datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)) == 0
    assert due_ms(datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)) == 1


def test_a_job_due_before_1970_runs_and_stops_nothing(
    app: App, redis_url: str, redis_prefix: str
) -> None:
    old = app.enqueue("noop", {}, run_at=datetime(1960, 1, 1, tzinfo=UTC)).id
    with leading(app, redis_url) as leader, running_worker(app, WorkerOptions(concurrency=4)):
        ids = [app.enqueue("noop", {}).id for _ in range(20)] + [old]
        wait_until(
            lambda: {app.get_job(i).status for i in ids} == {JobStatus.DONE},  # type: ignore[union-attr]
            what="every job, the one due in 1960 too, done",
        )
        assert leader.stager.failure is None


# -- H1: an entry that waits is not staged again -------------------------------------------


def test_jobs_no_worker_reads_are_not_staged_again_and_again(rig: Rig) -> None:
    rig.elector.epochs = {0: 1}
    ids = [job_in_partition(rig.app, 0) for _ in range(5)]
    rig.turn()
    assert rig.stream_length(0) == 5
    for _ in range(4):  # four restage windows: each asks Redis once, and stages nothing
        rig.turn(31.0)
    assert rig.calls.waiting_asked >= 3
    assert rig.stream_length(0) == 5
    assert {rig.app.get_job(i).status for i in ids} == {JobStatus.PENDING}  # type: ignore[union-attr]


def test_a_new_leader_adds_no_entry_beside_a_waiting_one(app: App, redis_url: str) -> None:
    first, second = make_rig(app, redis_url), make_rig(app, redis_url)
    try:
        first.elector.epochs = {0: 1}
        [job_in_partition(app, 0) for _ in range(5)]
        first.turn()
        assert first.stream_length(0) == 5
        second.elector.epochs = {0: 2}  # a failover: the successor stages its whole horizon
        second.turn()
        second.turn(31.0)
        assert second.stream_length(0) == 5
        assert len(second.leader.led.known) == 5  # adopted, asked about again later
    finally:
        first.timers.close()
        second.timers.close()


def test_a_job_whose_entry_is_gone_is_staged_again(rig: Rig) -> None:
    rig.elector.epochs = {0: 1}
    job = job_in_partition(rig.app, 0)
    rig.turn()
    stream = partition_keys(rig.app.config.redis_prefix, 0).stream("default")
    rig.timers.client.xtrim(stream, maxlen=0)  # the entry is lost, the job still pending
    rig.turn(31.0)
    assert rig.stream_length(0) == 1
    entries: Any = rig.timers.client.xrange(stream)
    assert [int(fields[b"job"]) for _, fields in entries] == [job]


# -- H2: an epoch from a rebuilt etcd does not stop a partition for ever ---------------------


def test_an_epoch_only_a_replaced_etcd_can_explain_is_overridden(rig: Rig) -> None:
    rig.timers.take_over(0, 500)  # left by the leaders of an etcd since rebuilt
    rig.elector.epochs = {0: 5}
    job = job_in_partition(rig.app, 0)
    rig.turn()
    assert rig.stream_length(0) == 0  # refused: stale
    rig.turn(1.0)
    assert not any(force for _, _, force in rig.calls.take_overs)  # not before a lease's ttl
    rig.turn(5.0)
    assert (0, 5, True) in rig.calls.take_overs
    rig.turn()
    assert rig.stream_length(0) == 1
    assert rig.timers.status(0, 0).epoch == 5
    assert rig.app.get_job(job).status == JobStatus.PENDING  # type: ignore[union-attr]


def test_a_partition_that_changed_hands_is_never_overridden(rig: Rig) -> None:
    rig.elector.epochs = {0: 5}
    rig.turn()
    rig.timers.take_over(0, 9)  # a successor took it over
    job_in_partition(rig.app, 0)
    rig.turn()
    rig.elector.epochs = {0: 12}  # our own next step sees the change: a new term
    rig.turn(6.0)
    assert not any(force for _, _, force in rig.calls.take_overs)
    assert rig.timers.status(0, 0).epoch == 12


# -- M1: a partition not trusted for an instant keeps its due timers --------------------------


def test_due_timers_of_a_partition_briefly_untrusted_still_move(app: App, redis_url: str) -> None:
    # Steps far apart and no sweep: only the fix can move partition 1's timer.
    rig = make_rig(app, redis_url, step_interval=10.0, trim_interval=1000.0)
    try:
        rig.elector.epochs = {0: 1, 1: 1}
        rig.elector.trust_of = {1: 0.1}  # partition 1's trust ends before its timer is due
        rig.leader.run_once()
        for number in (0, 1):  # the first sweep waits for the clock: drop it, no sweep here
            rig.leader.led.wheel.cancel((number, NEXT_IN_REDIS, 0))
        due = datetime.now(UTC) + timedelta(seconds=1)
        job_in_partition(rig.app, 0, run_at=due)
        job_in_partition(rig.app, 1, run_at=due)
        rig.leader.stage_once()
        rig.clock.advance(1.5)
        rig.leader.run_once()  # both keys expire; partition 1 may not act this instant
        assert (rig.stream_length(0), rig.stream_length(1)) == (1, 0)
        rig.elector.trust_of = {}
        rig.clock.advance(10.0)
        rig.leader.run_once()  # the next step trusts it again: its timer moves
        assert rig.stream_length(1) == 1
    finally:
        rig.timers.close()


def test_a_timer_staged_but_never_moved_is_found_by_the_sweep(rig: Rig) -> None:
    rig.elector.epochs = {0: 1}
    rig.turn()
    # Staged by a predecessor that died before its move; this leader knows nothing of it.
    rig.timers.stage(0, 1, [_fake_timer(0)])
    rig.turn(11.0)  # one trim interval
    assert rig.stream_length(0) == 1


# -- M2: a mover turn is bounded and re-checks its trust ------------------------------------


def _rig_with_30_due(app: App, redis_url: str, **options: Any) -> Rig:
    """A rig leading partition 0, with 30 due timers in Redis that it did not stage."""
    rig = make_rig(app, redis_url, move_batch=5, **options)
    rig.elector.epochs = {0: 1}
    rig.turn()
    rig.timers.stage(0, 1, [_fake_timer(n) for n in range(30)])
    return rig


def test_a_mover_turn_moves_a_bounded_number_of_batches(app: App, redis_url: str) -> None:
    rig = _rig_with_30_due(app, redis_url, move_batches_per_turn=2)
    try:
        rig.clock.advance(11.0)  # the sweep
        rig.leader.run_once()
        assert rig.moved() == 10
        rig.leader.run_once()
        assert rig.moved() == 20
    finally:
        rig.timers.close()


def test_a_mover_stops_at_the_end_of_its_trust_window(app: App, redis_url: str) -> None:
    rig = _rig_with_30_due(app, redis_url, move_batches_per_turn=100)
    try:
        move_due = rig.timers.move_due

        def slow_move(partition: int, epoch: int, now_ms: int, limit: int) -> Moved:
            rig.clock.advance(1.0)  # each batch takes a second: the window (2 s) ends
            return move_due(partition, epoch, now_ms, limit)

        rig.timers.move_due = slow_move  # type: ignore[method-assign]
        rig.clock.advance(11.0)
        rig.leader.run_once()  # trusted for 2 s from the step: two batches of a second each
        assert rig.moved() == 10
    finally:
        rig.timers.close()


def _fake_timer(n: int) -> Timer:
    """A timer of partition 0 for a job the database does not hold: nothing stages it."""
    return Timer(10_000_000 + n * PARTITIONS, 1, "default", 1)


# -- M5: a lost partition is taken over again only while trusted ----------------------------


def test_a_leader_past_its_trust_window_does_not_retake_a_lost_partition(rig: Rig) -> None:
    rig.elector.epochs = {0: 3}
    rig.turn()
    rig.timers.client.delete(partition_keys(rig.app.config.redis_prefix, 0).epoch)
    rig.elector.answering = False  # paused: its lease is going
    rig.clock.advance(2.5)
    part = rig.leader.partitions[0]
    rig.leader.led.lost(part)
    assert rig.timers.status(0, 0).epoch is None  # did not record its old epoch
    rig.elector.answering = True
    rig.turn(0.5)  # trusted again (same epoch): now it takes the partition over
    assert rig.timers.status(0, 0).epoch == 3


# -- L3: a job forgotten after a full pass leaves nothing in the wheel ---------------------------


def test_a_job_no_longer_pending_leaves_no_timer_in_the_wheel(rig: Rig) -> None:
    rig.elector.epochs = {0: 1}
    rig.turn()
    job = job_in_partition(rig.app, 0, run_at=datetime.now(UTC) + timedelta(seconds=20))
    rig.turn(1.0)
    token = rig.leader.led.known[job].token
    assert (0, job, token) in rig.leader.led.wheel
    rig.app.admin.cancel_job(job)
    rig.turn(1.0)  # the full pass no longer sees it
    assert job not in rig.leader.led.known
    assert (0, job, token) not in rig.leader.led.wheel


# -- L5: a step that trusts nothing suspends, it does not forget -----------------------------


def test_an_empty_step_suspends_and_the_same_epoch_resumes_without_restaging(rig: Rig) -> None:
    rig.elector.epochs = {0: 1}
    rig.turn()
    job_in_partition(rig.app, 0, run_at=datetime.now(UTC) + timedelta(seconds=20))
    rig.turn(1.0)
    assert len(rig.leader.led.known) == 1
    rig.elector.answering = False
    rig.turn(0.5)
    assert not rig.leader.led.acting()
    assert len(rig.leader.led.known) == 1  # kept
    rig.elector.answering = True
    rig.turn(0.5)
    assert [c.epoch for c in rig.changes] == [1]  # never stepped down, never taken over again
    rig.elector.answering = False
    rig.turn(0.5)
    rig.turn(6.0)  # unconfirmed past a lease's time to live: given up
    assert not rig.leader.partitions
    assert [c.epoch for c in rig.changes] == [1, None]


# -- passes: a near pass when a notification needs one, from a cursor that lags ----------------


def _insert_payload(run_at: datetime) -> str:
    return json.dumps({"queue": "default", "run_at": run_at.timestamp()})


def test_a_notification_asks_for_a_near_pass_only_when_the_full_one_is_too_late(
    rig: Rig,
) -> None:
    rig.elector.epochs = {0: 1}
    rig.turn()  # the first full pass; the next is stage_interval (1 s) away
    stager = rig.leader.stager
    stager.notified(_insert_payload(datetime.now(UTC) + timedelta(seconds=30)))
    assert stager.next_near == math.inf  # the next full pass stages it in time
    stager.notified(json.dumps({"queue": "default"}))
    assert stager.next_near == math.inf  # a job made pending again: for the full pass
    stager.notified(_insert_payload(datetime.now(UTC)))
    assert stager.next_near <= rig.clock() + 0.02  # due now: at once


def test_a_job_whose_insert_commits_after_a_later_one_is_found_by_a_near_pass(
    rig: Rig, pg_dsn: str
) -> None:
    rig.elector.epochs = dict.fromkeys(range(PARTITIONS), 1)
    rig.turn()
    with psycopg.connect(pg_dsn) as slow:
        slow_id = _enqueue_in(rig.app, slow)  # takes its id, commits later
        fast_id = rig.app.enqueue("noop", {}).id
        assert fast_id > slow_id
        _near_pass(rig)
        assert fast_id in rig.leader.led.known and slow_id not in rig.leader.led.known
        slow.commit()
    _near_pass(rig)
    assert slow_id in rig.leader.led.known  # without waiting for the full pass


def _enqueue_in(app: App, conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "INSERT INTO chronoq_jobs (task, queue, payload) VALUES ('noop', 'default', '{}')"
        " RETURNING id"
    ).fetchone()
    assert row is not None
    return int(row[0])


def _near_pass(rig: Rig) -> None:
    stager = rig.leader.stager
    stager.notified(_insert_payload(datetime.now(UTC)))
    rig.clock.advance(0.02)
    assert rig.clock() < stager.next_full  # not a full pass
    stager.stage_once()
