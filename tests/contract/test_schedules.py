"""Contract: stored schedules, a pass over one, ticks fired once, and leader election."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chronoq.core.jobs import JobStatus
from chronoq.core.schedules import Schedule
from chronoq.storage.base import (
    JobInsertParams,
    JobListParams,
    ScheduleAdvance,
    ScheduleUpsertParams,
)

from .support import Store, open_store

TICK = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def definition(name: str = "digest", cadence: str = "0 9 * * *", **changes: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {
        "name": name,
        "cadence": cadence,
        "zone": "UTC",
        "task": "send_digest",
        "payload_json": '{"kind": "daily"}',
        "queue": "mail",
        "priority": 0,
        "misfire": "coalesce",
        "misfire_grace": 60.0,
        "catch_up": None,
        "jitter": 0.0,
    }
    values.update(changes)
    return ScheduleUpsertParams(**values)  # type: ignore[arg-type]


def tick_job(name: str, tick: datetime, ticks: int = 1) -> JobInsertParams:
    return JobInsertParams(
        queue="mail",
        task="send_digest",
        payload_json="{}",
        run_at=tick,
        schedule=name,
        tick=tick,
        ticks=ticks,
    )


def fire(store: Store, name: str, *ticks: datetime, cursor: datetime | None = None) -> int:
    """One pass that fires `ticks`; returns how many were inserted."""

    def decide(schedule: Schedule, now: datetime) -> ScheduleAdvance:
        return ScheduleAdvance(
            jobs=[tick_job(name, tick) for tick in ticks],
            cursor=cursor or max(ticks),
            next_tick=(cursor or max(ticks)) + timedelta(days=1),
            late=1,
            lateness_total=2.5,
            lateness_max=2.5,
        )

    advance = store.schedule_advance(name, decide)
    assert advance is not None
    return advance.inserted


def schedule_jobs(store: Store, name: str) -> list[tuple[datetime | None, JobStatus]]:
    jobs = store.job_list(JobListParams(limit=1000))
    return sorted((job.tick, job.status) for job in jobs if job.schedule == name)


def test_a_schedule_is_created_then_updated_keeping_its_state(store: Store) -> None:
    before = store.db_now()
    assert store.schedule_upsert(definition())
    created = store.schedule_get("digest")
    assert created is not None
    assert created.payload == {"kind": "daily"} and created.origin == "cli"
    assert before <= created.tick_cursor <= store.db_now()  # fires from its next tick on
    assert fire(store, "digest", TICK) == 1
    assert not store.schedule_upsert(definition(cadence="30 9 * * *", origin="code"))
    updated = store.schedule_get("digest")
    assert updated is not None
    assert (updated.cadence, updated.origin, updated.fired) == ("30 9 * * *", "code", 1)
    assert updated.tick_cursor == TICK  # the cursor and counters survive a redefinition
    assert updated.next_tick is None  # a new cadence has its next tick computed again
    assert [s.name for s in store.schedule_list()] == ["digest"]


def test_a_tick_fires_once_however_often_it_is_inserted(store: Store) -> None:
    store.schedule_upsert(definition())
    assert fire(store, "digest", TICK) == 1
    assert fire(store, "digest", TICK) == 0  # a second scheduler, or a retried pass
    assert fire(store, "digest", TICK, TICK + timedelta(days=1)) == 1
    assert schedule_jobs(store, "digest") == [
        (TICK, JobStatus.PENDING),
        (TICK + timedelta(days=1), JobStatus.PENDING),
    ]
    stored = store.schedule_get("digest")
    assert stored is not None
    assert (stored.fired, stored.late, stored.lateness_max) == (2, 3, 2.5)
    assert stored.lateness_total == pytest.approx(7.5)
    assert stored.last_fired is not None


def test_a_tick_fires_once_across_concurrent_passes(store: Store) -> None:
    store.schedule_upsert(definition())
    other = open_store(store)
    try:
        inserted = [fire(s, "digest", TICK) for s in (store, other, store, other)]
    finally:
        other.close()
    assert sum(inserted) == 1


def test_due_schedules_are_those_with_a_tick_within_the_lookahead(store: Store) -> None:
    store.schedule_upsert(definition("new"))
    store.schedule_upsert(definition("later"))
    store.schedule_upsert(definition("paused"))
    fire(store, "later", TICK)  # its next tick is in 2030
    store.schedule_pause("paused", True)
    due = store.schedule_due(timedelta(seconds=5))
    assert due.names == ["new"]  # never passed over yet: its next tick is unknown
    assert due.next_tick == TICK + timedelta(days=1)


# Byte order and a linguistic collation (a PostgreSQL cluster's default may be one) disagree on
# these: "B" < "_" < "a" < "b" by bytes.
MIXED_CASE = ["b", "B", "a", "_x"]


def test_due_schedules_are_named_in_byte_order(store: Store) -> None:
    for name in MIXED_CASE:
        store.schedule_upsert(definition(name))
    assert store.schedule_due(timedelta(seconds=5)).names == sorted(MIXED_CASE)
    assert [s.name for s in store.schedule_list()] == sorted(MIXED_CASE)


def test_pausing_cancels_ticks_fired_ahead_and_resuming_starts_from_now(store: Store) -> None:
    store.schedule_upsert(definition())
    past = datetime(2021, 1, 1, tzinfo=UTC)
    fire(store, "digest", past, TICK)
    paused = store.schedule_pause("digest", True)
    assert paused is not None and paused.paused
    # The tick already due stays; the one fired ahead of its time is cancelled.
    assert schedule_jobs(store, "digest") == [
        (past, JobStatus.PENDING),
        (TICK, JobStatus.CANCELLED),
    ]
    assert store.schedule_advance("digest", lambda s, now: ScheduleAdvance()) is None
    before = store.db_now()
    resumed = store.schedule_pause("digest", False)
    assert resumed is not None and not resumed.paused
    assert resumed.tick_cursor >= before  # ticks that fell in the pause are not owed
    assert store.schedule_pause("nope", True) is None


def test_removing_a_schedule_cancels_its_pending_jobs(store: Store) -> None:
    store.schedule_upsert(definition())
    fire(store, "digest", datetime(2021, 1, 1, tzinfo=UTC))
    assert store.schedule_remove("digest")
    assert not store.schedule_remove("digest")
    assert store.schedule_get("digest") is None
    assert [status for _, status in schedule_jobs(store, "digest")] == [JobStatus.CANCELLED]


def test_a_decision_of_nothing_changes_nothing(store: Store) -> None:
    store.schedule_upsert(definition())
    before = store.schedule_get("digest")
    assert store.schedule_advance("digest", lambda s, now: None) is None
    assert store.schedule_advance("missing", lambda s, now: ScheduleAdvance()) is None
    assert store.schedule_get("digest") == before


def test_the_decision_sees_the_database_clock(store: Store) -> None:
    store.schedule_upsert(definition())
    seen: list[datetime] = []

    def decide(schedule: Schedule, now: datetime) -> None:
        seen.append(now)

    before = store.db_now()
    store.schedule_advance("digest", decide)
    assert before <= seen[0] <= store.db_now()
    assert seen[0].tzinfo is not None
