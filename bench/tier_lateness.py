"""`python -m bench.tier_lateness`: how late timed jobs start, tiered dispatch against db dispatch.

Jobs are enqueued with `run_at` spread uniformly over the next few seconds, so every one is a
timer that must fire at its instant (not a backlog). One worker (concurrency 16) runs them; in
tiered mode a partition leader in the same process stages them into Redis, holds them in its
timing wheel and moves each bucket onto the streams the worker blocks on (its leadership comes
from the static elector: etcd costs nothing per job). Lateness is `started_at - run_at`, both
on the database clock, read from the rows afterwards; the move lateness of the tier (database
clock at the move minus the earliest timer moved) comes from its `TimersMoved` events.

Each mode runs on a fresh database and a flushed Redis database (CHRONOQ_BENCH_REDIS, default
db 14), the two modes interleaved `--repeats` times in one session.

    .venv/bin/python -m bench.tier_lateness [--jobs 2000] [--spread 5] [--horizon 30] [--repeats 3]
                                            [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.harness import Settings, fresh_environment, latency_stats
from chronoq import App, JobSpec, JobStatus, Worker, WorkerOptions
from chronoq.coordination import StaticElector
from chronoq.observability.events import Observers, Subscription, TimersMoved
from chronoq.storage.base import JobListParams
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.redis import RedisTimerStore, connect

PARTITIONS = 4
CONCURRENCY = 16


class MoveLateness:
    def __init__(self) -> None:
        self.late: list[float] = []

    def subscriptions(self) -> list[Subscription[Any]]:
        return [Subscription(TimersMoved, lambda e: self.late.append(e.late))]


def make_app(dsn: str, redis_url: str, mode: str, horizon: float) -> App:
    settings: dict[str, Any] = {"dispatch": mode}
    if mode == "tiered":
        settings |= {
            "redis_url": redis_url,
            "etcd_endpoints": "http://127.0.0.1:2379",  # unused: the static elector leads
            "partitions": PARTITIONS,
            "stage_horizon": horizon,
        }
    app = App(dsn, **settings)

    @app.task
    def noop() -> None:
        pass

    app.migrate()
    return app


@contextmanager
def leader(app: App, redis_url: str, moves: MoveLateness) -> Iterator[None]:
    timers = RedisTimerStore(connect(redis_url), prefix=app.config.redis_prefix)
    horizon = app.config.stage_horizon
    options = TierOptions(partitions=PARTITIONS, horizon=horizon, step_interval=0.1)
    tier = TierLeader(
        app.runtime(), StaticElector("bench", PARTITIONS), timers, options, Observers([moves])
    )
    stop = threading.Event()
    thread = threading.Thread(target=tier.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        tier.wake()
        thread.join(timeout=10)
        timers.close()


@contextmanager
def worker(app: App) -> Iterator[None]:
    running = Worker(app, WorkerOptions(concurrency=CONCURRENCY))
    thread = threading.Thread(target=running.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        yield
    finally:
        running.request_stop()
        thread.join(timeout=30)


def run_once(
    settings: Settings, mode: str, jobs: int, spread: float, horizon: float
) -> dict[str, Any]:
    target = fresh_environment(settings)
    app = make_app(target.pg_dsn, settings.redis_url, mode, horizon)
    moves = MoveLateness()
    try:
        tier = leader(app, settings.redis_url, moves) if mode == "tiered" else _nothing()
        with tier, worker(app):
            specs = [
                JobSpec("noop", delay=timedelta(seconds=1 + spread * n / jobs)) for n in range(jobs)
            ]
            app.enqueue_many(specs)
            _wait_done(app, jobs, timeout=spread + 60)
        late = _lateness(app)
    finally:
        app.close()
    row: dict[str, Any] = {"mode": mode, "jobs": jobs, "spread_s": spread, **latency_stats(late)}
    if mode == "tiered":
        row["horizon_s"] = horizon
    if moves.late:
        row["move"] = latency_stats(moves.late)
    return row


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _wait_done(app: App, jobs: int, timeout: float) -> None:
    done = threading.Event()
    deadline = timeout
    while not done.wait(0.1):
        deadline -= 0.1
        counts = {s.status: s.count for s in app.store.stats()}
        if counts.get(JobStatus.DONE, 0) >= jobs:
            return
        if deadline <= 0:
            raise TimeoutError(f"only {counts.get(JobStatus.DONE, 0)} of {jobs} done")


def _lateness(app: App) -> list[float]:
    late: list[float] = []
    before: int | None = None
    while page := app.store.job_list(
        JobListParams(statuses=[JobStatus.DONE], limit=1000, before_id=before)
    ):
        late += [(job.started_at - job.run_at).total_seconds() for job in page if job.started_at]
        before = page[-1].id
    return late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--spread", type=float, default=5.0)
    parser.add_argument("--horizon", type=float, default=30.0, help="stage_horizon, seconds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = Settings.tiny(
        systems=(),
        admin_dsn=os.environ.get(
            "CHRONOQ_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        redis_url=os.environ.get("CHRONOQ_BENCH_REDIS", "redis://127.0.0.1:6379/14"),
        work_dir=Path(tempfile.mkdtemp(prefix="chronoq-bench-")),
    )
    rows = []
    for repeat in range(args.repeats):
        for mode in ("db", "tiered"):
            row = run_once(settings, mode, args.jobs, args.spread, args.horizon) | {
                "run": repeat + 1
            }
            print(json.dumps(row))
            rows.append(row)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count()}
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
