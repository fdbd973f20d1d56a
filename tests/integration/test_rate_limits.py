"""Rate-limited dispatch with real workers: the 09:00 herd drains as a stream, limits hold
across worker processes, and paused queues claim nothing until resumed."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg
import pytest

import chronoq
from chronoq.core.jobs import JobStatus
from chronoq.core.ratelimit import Bucket
from chronoq.storage.base import JobListParams
from tests.helpers import running_worker, wait_until

HERD = 20_000
RATE = 1000  # jobs a second
BURST = 50  # the default bucket: 50 ms of the rate


def build_app(dsn: str) -> chronoq.App:
    app = chronoq.App(dsn)

    @app.task(queue="herd")
    def greet() -> None:
        pass

    @app.task(queue="mail")
    def send() -> None:
        pass

    return app


@pytest.fixture
def app(dsn: str) -> Iterator[chronoq.App]:
    with build_app(dsn) as app:
        yield app


@pytest.fixture
def pg_app(pg_dsn: str) -> Iterator[chronoq.App]:
    with build_app(pg_dsn) as app:
        yield app


def start_times(dsn: str) -> list[datetime]:
    """The database's own start instants of the herd's jobs."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT started_at FROM chronoq_jobs WHERE queue = 'herd' ORDER BY started_at"
        ).fetchall()
    return [row[0] for row in rows]


def busiest_window(starts: list[datetime], width: timedelta) -> int:
    """The most jobs started in any window [t, t + width) that begins at a start."""
    return max(bisect.bisect_left(starts, t + width, lo=i) - i for i, t in enumerate(starts))


# It measures the worker keeping pace with the bucket, 1,000 claims' worth a second for 20 s:
# beside pytest-xdist's other workers on two cores it left 62-114% of the herd's count unclaimed
# in 3 of 5 parallel runs. `make test` runs it after the parallel suite, alone.
@pytest.mark.alone
def test_a_herd_due_at_once_drains_at_the_queue_rate(pg_dsn: str, pg_app: chronoq.App) -> None:
    app = pg_app
    app.limit("herd", rate=f"{RATE}/s")
    app.sync_limits()
    due = app.store.db_now()
    app.enqueue_many(chronoq.JobSpec("greet", run_at=due) for _ in range(HERD))
    # 100 slots against a bucket of 50: the bucket, never the free slots, bounds every claim.
    options = chronoq.WorkerOptions(queues=["herd"], concurrency=100)
    with running_worker(app, options):
        wait_until(lambda: _done(pg_dsn) == HERD, timeout=90, what="the herd to drain")
    starts = start_times(pg_dsn)
    assert len(starts) == HERD
    span = (starts[-1] - starts[0]).total_seconds()
    assert span >= 19.0, span  # 20,000 jobs at 1,000/s after a burst of 50: 19.95 s
    # Every claim took what the bucket held (replay_claims), so the herd took longer than
    # 19.95 s only by the time of the tokens nobody claimed: the bucket's burst and its refill
    # over the span, less the jobs claimed. They spilled from the full bucket while the worker
    # did not claim, which is the machine's pace as much as the worker's. Runs seen left 0.1%
    # of the herd's count alone, 6% beside six busy loops on two cores, 12% inside the whole
    # suite and 35% alone on a machine at half its usual pace. A worker that looked again
    # 100 ms after the next token instead of at it left 111% (the herd took 42 s), and one
    # that waited its poll interval would leave far more.
    replay_claims(starts)
    unclaimed = BURST + RATE * span - HERD
    assert unclaimed <= HERD / 2, (span, unclaimed)
    per_second = Counter(start.replace(microsecond=0) for start in starts)
    assert max(per_second.values()) <= RATE + BURST, per_second.most_common(3)
    assert busiest_window(starts, timedelta(seconds=1)) <= RATE + BURST


def replay_claims(starts: list[datetime]) -> None:
    """Replay the queue's bucket through the herd's claims, each the jobs started at one
    instant (a claim starts its jobs at the database time it charged the bucket at), and
    check that every claim took no more than the bucket's whole tokens and, but the last,
    all of them."""
    claims = sorted(Counter(starts).items())
    bucket = Bucket(float(RATE), float(BURST), float(BURST), None)
    for number, (instant, taken) in enumerate(claims):
        whole = bucket.whole_tokens(instant)
        assert taken <= whole, (instant, taken, bucket.available(instant))
        if number < len(claims) - 1:
            assert taken == whole, (instant, taken, bucket.available(instant))
        bucket = bucket.spend(instant, taken)


def _done(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM chronoq_jobs WHERE queue = 'herd' AND status = 'done'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_concurrency_limit_holds_across_workers(dsn: str, app: chronoq.App) -> None:
    app.limit("mail", concurrency=2)
    # Stored before either worker starts: `other` declares no limit, so it would not store it
    # itself, and could claim freely before the first worker's start-up stored it.
    app.sync_limits()
    ids = [r.id for r in app.enqueue_many(chronoq.JobSpec("send") for _ in range(30))]
    options = chronoq.WorkerOptions(queues=["mail"], concurrency=10)
    other = chronoq.App(dsn)
    other.tasks = app.tasks
    with running_worker(app, options), running_worker(other, options):
        wait_until(lambda: _all(app, ids, JobStatus.DONE), timeout=60, what="all mail sent")
    other.close()
    jobs = [app.get_job(job_id) for job_id in ids]
    spans = sorted(
        (job.started_at, job.finished_at)
        for job in jobs
        if job and job.started_at and job.finished_at
    )
    # At no start were more than two of the queue's jobs between their start and their end.
    for start, _ in spans:
        overlapping = sum(1 for s, f in spans if s <= start < f)
        assert overlapping <= 2


def test_a_paused_queue_waits_and_a_resumed_one_runs(app: chronoq.App) -> None:
    app.store.queue_pause("mail", True)
    [job] = app.enqueue_many([chronoq.JobSpec("send")])
    with running_worker(app, chronoq.WorkerOptions(queues=["mail"], poll_interval=0.2)) as (
        _,
        signals,
    ):
        signals.wait_for(lambda: signals.idles >= 2)
        assert signals.claims == []
        app.store.queue_pause("mail", False)
        signals.wait_for(lambda: len(signals.finishes) == 1)
    stored = app.get_job(job.id)
    assert stored is not None and stored.status is JobStatus.DONE


def test_a_noisy_key_does_not_starve_the_others(app: chronoq.App) -> None:
    app.limit_keys("mail", "customer:*", rate="2/s", burst=1)
    noisy = app.enqueue_many(chronoq.JobSpec("send", rate_key="customer:noisy") for _ in range(200))
    quiet = app.enqueue_many(chronoq.JobSpec("send", rate_key=f"customer:{i}") for i in range(20))
    with running_worker(app, chronoq.WorkerOptions(queues=["mail"], concurrency=5)):
        wait_until(
            lambda: _all(app, [r.id for r in quiet], JobStatus.DONE), what="the quiet customers"
        )
    done = app.store.job_list(JobListParams(statuses=[JobStatus.DONE], limit=1000))
    noisy_done = sum(1 for job in done if job.rate_key == "customer:noisy")
    assert noisy_done <= 12  # 2/s over the few seconds the quiet ones took, not 200
    assert len(noisy) == 200


def _all(app: chronoq.App, ids: list[int], status: JobStatus) -> bool:
    return all((job := app.get_job(job_id)) is not None and job.status is status for job_id in ids)
