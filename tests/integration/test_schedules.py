"""Schedules end to end: each misfire policy after an outage, jitter, DST-aware firing through
the enqueuer, pausing, and two schedulers in one database firing each tick once."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import psycopg
import pytest

import chronoq
from chronoq.core.cron import parse_cadence
from chronoq.core.jobs import Job
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.scheduler.services import CronEnqueuer, CronOptions
from chronoq.storage.base import JobListParams
from chronoq.storage.rows import datetime_to_micros
from chronoq.testing import SchedulerSignals
from tests.helpers import wait_until

MINUTE = timedelta(minutes=1)


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    app = chronoq.App(dsn)

    @app.task(queue="reports")
    def report(kind: str = "daily") -> None:
        pass

    yield app
    app.close()


def rewind(app: chronoq.App, name: str, to: datetime) -> None:
    """Simulate an outage: the schedule was last handled at `to`, and nothing ran since."""
    dsn = app.config.dsn
    if dsn.startswith("sqlite"):
        with sqlite3.connect(app.store.path) as db:  # type: ignore[attr-defined]
            db.execute(
                "UPDATE chronoq_schedules SET tick_cursor = ?, next_tick = NULL WHERE name = ?",
                (datetime_to_micros(to), name),
            )
    else:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE chronoq_schedules SET tick_cursor = %s, next_tick = NULL WHERE name = %s",
                (to, name),
            )


def tick_jobs(app: chronoq.App, name: str) -> list[Job]:
    jobs = app.store.job_list(JobListParams(limit=10_000))
    return sorted((job for job in jobs if job.schedule == name), key=lambda job: job.tick or 0)


def add(app: chronoq.App, cadence: str, **options: object) -> chronoq.ScheduleSpec:
    spec = app.schedule_spec(name="every-minute", cadence=cadence, task="report", **options)  # type: ignore[arg-type]
    app.add_schedule(spec)
    return spec


def outage(app: chronoq.App, **options: object) -> tuple[list[Job], chronoq.Schedule, datetime]:
    """An every-minute schedule whose scheduler was down for 30 minutes, then one pass."""
    add(app, "* * * * *", **options)
    now = app.store.db_now()
    rewind(app, "every-minute", now - 30 * MINUTE)
    CronEnqueuer(app.runtime(), CronOptions(lookahead=timedelta(seconds=5))).run_once()
    schedule = app.store.schedule_get("every-minute")
    assert schedule is not None
    return tick_jobs(app, "every-minute"), schedule, now


def missed_ticks(now: datetime, grace: timedelta) -> list[datetime]:
    cadence = parse_cadence("* * * * *")
    return cadence.ticks_between(now - 30 * MINUTE, now - grace, 100)


def test_run_late_fires_every_missed_tick(app: chronoq.App) -> None:
    jobs, schedule, now = outage(app, misfire="run_late", misfire_grace="90s")
    missed = missed_ticks(now, timedelta(seconds=90))
    fired = [job.tick for job in jobs]
    assert fired[: len(missed)] == missed
    assert len(jobs) >= len(missed) >= 28
    assert schedule.late >= len(missed) and schedule.skipped == 0
    assert schedule.lateness_max >= 28 * 60


def test_skip_drops_missed_ticks_and_counts_them(app: chronoq.App) -> None:
    jobs, schedule, now = outage(app, misfire="skip", misfire_grace="90s")
    missed = missed_ticks(now, timedelta(seconds=90))
    assert all(job.tick is not None and job.tick > missed[-1] for job in jobs)
    assert schedule.skipped == len(missed)
    # Its tick jobs carry the policy: one that waits past its grace is skipped at pick-up.
    assert all((job.misfire, job.misfire_grace) == ("skip", 90.0) for job in jobs)


def test_coalesce_fires_one_job_carrying_the_count(app: chronoq.App) -> None:
    jobs, schedule, now = outage(app, misfire="coalesce", misfire_grace="90s")
    missed = missed_ticks(now, timedelta(seconds=90))
    coalesced = [job for job in jobs if job.ticks > 1]
    assert len(coalesced) == 1
    assert coalesced[0].tick == missed[-1]
    assert coalesced[0].ticks == len(missed)
    assert schedule.coalesced == len(missed) - 1
    assert all(job.tick is not None and job.tick > missed[-1] for job in jobs if job.ticks == 1)


def test_catch_up_runs_the_most_recent_n(app: chronoq.App) -> None:
    jobs, schedule, now = outage(app, misfire="catch_up", catch_up=3, misfire_grace="90s")
    missed = missed_ticks(now, timedelta(seconds=90))
    assert [job.tick for job in jobs][:3] == missed[-3:]
    assert schedule.skipped == len(missed) - 3


def test_a_second_pass_fires_nothing_new(app: chronoq.App) -> None:
    jobs, _, _ = outage(app, misfire="run_late", misfire_grace="90s")
    CronEnqueuer(app.runtime()).run_once()
    assert [job.id for job in tick_jobs(app, "every-minute")] == [job.id for job in jobs]


def test_jitter_stays_inside_its_window_and_is_the_same_everywhere(app: chronoq.App) -> None:
    jobs, _, _ = outage(app, misfire="run_late", misfire_grace="90s", jitter="40s")
    offsets = [(job.run_at - job.tick).total_seconds() for job in jobs if job.tick]
    assert len(offsets) >= 28
    assert all(0 <= offset < 40 for offset in offsets)
    assert len(set(offsets)) > len(offsets) // 2  # spread, not one fixed delay
    expected = [
        chronoq.core.cron.jitter_offset("every-minute", job.tick, timedelta(seconds=40))
        for job in jobs
        if job.tick
    ]
    assert offsets == [offset.total_seconds() for offset in expected]


def test_ticks_are_enqueued_ahead_to_run_at_their_instant(app: chronoq.App) -> None:
    add(app, "every 2s")
    CronEnqueuer(app.runtime(), CronOptions(lookahead=timedelta(seconds=5))).run_once()
    jobs = tick_jobs(app, "every-minute")
    now = app.store.db_now()
    assert 2 <= len(jobs) <= 3
    assert all(job.run_at == job.tick for job in jobs)
    assert all(
        now - timedelta(seconds=1) < job.run_at <= now + timedelta(seconds=5) for job in jobs
    )
    assert [job.payload for job in jobs] == [{}] * len(jobs)


def test_a_paused_schedule_fires_nothing_and_resumes_from_now(app: chronoq.App) -> None:
    add(app, "* * * * *")
    app.store.schedule_pause("every-minute", True)
    rewind(app, "every-minute", app.store.db_now() - 30 * MINUTE)
    CronEnqueuer(app.runtime()).run_once()
    assert tick_jobs(app, "every-minute") == []
    app.store.schedule_pause("every-minute", False)
    CronEnqueuer(app.runtime()).run_once()
    schedule = app.store.schedule_get("every-minute")
    assert schedule is not None
    assert (schedule.skipped, schedule.coalesced, schedule.late) == (0, 0, 0)


def test_declared_schedules_sync_and_keep_their_state(dsn: str) -> None:
    def build() -> chronoq.App:
        app = chronoq.App(dsn)

        @app.schedule(
            "0 9 * * *", zone="Europe/Paris", misfire="skip", misfire_grace="5m", jitter="1m"
        )
        @app.task
        def digest() -> None:
            pass

        return app

    first = build()
    report = first.sync()
    assert report.created == ["digest"]
    first.store.schedule_pause("digest", True)
    first.close()
    second = build()
    assert second.sync().updated == ["digest"]
    stored = second.store.schedule_get("digest")
    assert stored is not None
    assert (stored.zone, stored.misfire, stored.misfire_grace, stored.jitter) == (
        "Europe/Paris",
        "skip",
        300.0,
        60.0,
    )
    assert stored.paused and stored.origin == "code"
    bare = chronoq.App(dsn)
    assert bare.sync().undeclared == ["digest"]
    bare.close()
    second.close()


def test_two_schedulers_in_one_database_elect_one_leader_and_fire_each_tick_once(
    app: chronoq.App,
) -> None:
    add(app, "every 1s")
    options = SchedulerOptions(election_interval=0.2, leader_ttl=2.0)
    elected = threading.Event()

    class Signals(SchedulerSignals):
        def elected(self, term: object) -> None:
            elected.set()

    apps = [chronoq.App(app.config.dsn), chronoq.App(app.config.dsn)]
    schedulers = [Scheduler(a, options, observers=[Signals()]) for a in apps]
    threads = [
        threading.Thread(target=s.run, kwargs={"install_signal_handlers": False}, daemon=True)
        for s in schedulers
    ]
    for thread in threads:
        thread.start()
    try:
        elected.wait(20)
        wait_until(lambda: len(tick_jobs(app, "every-minute")) >= 8, what="eight ticks")
        assert sum(s.is_leader for s in schedulers) == 1
    finally:
        for s in schedulers:
            s.request_stop()
        for thread in threads:
            thread.join(20)
        for a in apps:
            a.close()
    ticks = [job.tick for job in tick_jobs(app, "every-minute")]
    assert len(ticks) == len(set(ticks))
    assert all((b - a) == timedelta(seconds=1) for a, b in pairwise(ticks))
    assert all(tick.microsecond == 0 for tick in ticks if tick)


def test_bad_schedules_are_refused_with_the_reason(app: chronoq.App) -> None:
    cases = [
        ({"cadence": "61 * * * *"}, "cron"),
        ({"cadence": "0 9 * * *", "zone": "Mars/Olympus"}, "time zone"),
        ({"cadence": "0 9 * * *", "misfire_grace": "-5s"}, "negative"),
        ({"cadence": "0 9 * * *", "misfire": "sometimes"}, "misfire"),
        ({"cadence": "0 9 * * *", "misfire": "catch_up"}, "catch_up"),
        ({"cadence": "every 0s"}, "interval"),
        ({"cadence": "0 9 * * *", "jitter": "-1m"}, "jitter"),
        ({"cadence": "every 1s", "jitter": "10m"}, "jitter 10m00s must be shorter than"),
        ({"cadence": "every 1m", "jitter": "1m"}, r"shortest interval .* 'every 1m', 1m00s"),
        ({"cadence": "0 9 * * *", "jitter": "1d"}, r"jitter 1d00h must be shorter .* 1d00h"),
    ]
    for options, words in cases:
        with pytest.raises(chronoq.ConfigError, match=words):
            app.schedule_spec(name="bad", task="report", **options)  # type: ignore[arg-type]
    with pytest.raises(chronoq.UnknownTask, match="reprot"):
        app.schedule_spec(name="bad", cadence="0 9 * * *", task="reprot")
    with pytest.raises(chronoq.InvalidPayload):
        app.schedule_spec(name="bad", cadence="0 9 * * *", task="report", payload={"x": 1})
    assert app.store.schedule_list() == []


def test_one_off_jobs_take_run_late_or_skip(app: chronoq.App) -> None:
    job = app.enqueue("report", misfire="skip", misfire_grace="5m")
    stored = app.get_job(job.id)
    assert stored is not None and (stored.misfire, stored.misfire_grace) == ("skip", 300.0)
    with pytest.raises(chronoq.InvalidSchedule, match="schedules only"):
        app.enqueue("report", misfire="coalesce")
    with pytest.raises(chronoq.InvalidSchedule, match="negative"):
        app.enqueue("report", misfire="skip", misfire_grace=-1)
    late = app.enqueue("report", run_at=datetime(2020, 1, 1, tzinfo=UTC), misfire="skip")
    skipped = app.store.job_claim_with_wakeup(
        chronoq.storage.base.JobClaimParams(["reports"], 10, "w")
    )
    assert late.id not in [j.id for j in skipped.jobs]
    after = app.get_job(late.id)
    assert after is not None and after.status is chronoq.JobStatus.SKIPPED
