"""`chronoq demo`: a short live tour of chronoq, by default on a fresh SQLite file.

It registers a few tasks, enqueues a realistic mix and runs a Worker in this process while a live
table shows the jobs move through their states:

- immediate jobs, async (`demo.greet`, on the event loop) and sync (`demo.resize_image`, in a
  thread);
- jobs delayed by a few seconds, and jobs at an aware instant a few seconds ahead;
- a webhook that fails twice and succeeds on its third attempt, after a short backoff;
- an export that always fails and ends dead after its three attempts;
- duplicate-key enqueues, where the second returns the first job with `created=False`.

The summary is computed from the stored jobs: done and dead counts, and how late jobs started
after they were due (`started_at - run_at`, both on the database clock).

The demo ignores CHRONOQ_DSN on purpose: that variable usually names a real database, and the
demo resets its database. It only deletes a SQLite file that holds nothing but demo queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from chronoq.app import App
from chronoq.cli.invocation import EXIT_FAILURE, EXIT_OK, Invocation
from chronoq.cli.output import STATUS_STYLES, Output, quiet_logger
from chronoq.config import Config
from chronoq.core.backoff import Backoff
from chronoq.core.enqueue import Enqueued, JobSpec
from chronoq.core.jobs import Job, JobStatus
from chronoq.errors import ConfigError, SchemaMissing
from chronoq.observability.events import AttemptsEnded, Subscription
from chronoq.storage import open_store
from chronoq.storage.base import JobListParams
from chronoq.storage.dsn import redact, sqlite_path, store_kind
from chronoq.worker.context import JobContext
from chronoq.worker.worker import Worker, WorkerOptions

DEMO_DSN = "sqlite:///chronoq-demo.db"
QUEUES = ("demo", "demo-media")
DEADLINE_SECONDS = 50.0
REFRESH_SECONDS = 0.25
FLAKY_FAILURES = 2
DOOMED_ATTEMPTS = 3
BAR_WIDTH = 30


def demo(run: Invocation) -> int:
    total: int = run.args.jobs  # bounded by the parser (parser.demo_job_count)
    dsn = run.dsn or DEMO_DSN
    reset_demo_database(dsn)
    with App(config=Config.load(dsn=dsn)) as app, _quiet_worker_logs():
        register_tasks(app)
        app.migrate()
        plan = enqueue_mix(app, total)
        run.out.show(plan_view(plan, redact(dsn)))
        started = time.monotonic()
        finished = run_worker_live(app, plan, run.out)
        summary = Summary.of(fetch_jobs(app, plan), plan, time.monotonic() - started)
    run.out.show(summary.view())
    if not finished:
        run.out.error(f"the demo jobs did not all finish within {DEADLINE_SECONDS:.0f}s")
        return EXIT_FAILURE
    if not summary.as_expected:
        run.out.error("the jobs did not end as planned; see the summary above")
        return EXIT_FAILURE
    return EXIT_OK


# -- the database -------------------------------------------------------------------------


def reset_demo_database(dsn: str) -> None:
    """Start from an empty SQLite file. On PostgreSQL, this run's jobs are told apart by id."""
    if store_kind(dsn) != "sqlite":
        return
    path = Path(sqlite_path(dsn))
    if not path.exists():
        return
    if path.stat().st_size > 0 and not _holds_only_demo_jobs(dsn):
        raise ConfigError(
            f"{path} holds data that is not from the demo, and the demo starts from an empty "
            f"database; pass another file, e.g. --dsn {DEMO_DSN}"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _holds_only_demo_jobs(dsn: str) -> bool:
    store = open_store(Config.load(dsn=dsn), migrate_sqlite=False)
    try:
        return {stat.queue for stat in store.stats()} <= set(QUEUES)
    except SchemaMissing:
        return False
    finally:
        store.close()


# -- tasks --------------------------------------------------------------------------------


def register_tasks(app: App) -> None:
    @app.task(name="demo.greet", queue="demo")
    async def greet(name: str) -> None:
        await asyncio.sleep(random.uniform(0.01, 0.15))  # an awaited call to another service

    @app.task(name="demo.resize_image", queue="demo-media")
    def resize_image(image: str, width: int) -> None:
        time.sleep(random.uniform(0.01, 0.15))  # blocking work: runs in a worker thread

    @app.task(name="demo.send_reminder", queue="demo")
    async def send_reminder(user_id: int) -> None:
        await asyncio.sleep(0.01)

    @app.task(name="demo.daily_report", queue="demo")
    async def daily_report(region: str) -> None:
        await asyncio.sleep(0.02)

    @app.task(
        name="demo.flaky_webhook",
        queue="demo",
        max_attempts=5,
        backoff=Backoff(base=0.1, cap=0.5),
    )
    def flaky_webhook(ctx: JobContext, url: str) -> None:
        if ctx.attempt <= FLAKY_FAILURES:
            raise ConnectionError(f"{url} answered 503 on attempt {ctx.attempt}")

    @app.task(
        name="demo.doomed_export",
        queue="demo",
        max_attempts=DOOMED_ATTEMPTS,
        backoff=Backoff(base=0.1, cap=0.3),
    )
    def doomed_export(report: str) -> None:
        raise RuntimeError(f"export of {report} failed: the bucket does not exist")


# -- what is enqueued ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Duplicate:
    key: str
    first: Enqueued
    second: Enqueued


@dataclass(slots=True)
class Plan:
    ids: list[int] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    duplicates: list[Duplicate] = field(default_factory=list)
    doomed: int = 0

    def add(self, kind: str, results: Sequence[Enqueued]) -> None:
        self.ids.extend(result.id for result in results if result.created)
        self.kinds[kind] += len(results)


def enqueue_mix(app: App, total: int) -> Plan:
    plan = Plan()
    delayed, at_time, flaky, doomed, keyed = max(1, total // 5), max(1, total // 10), 2, 2, 2
    immediate = total - delayed - at_time - flaky - doomed - keyed
    plan.add("immediate", app.enqueue_many(_immediate_specs(immediate)))
    plan.add("delayed", app.enqueue_many(_delayed_specs(delayed)))
    plan.add("at a set time", app.enqueue_many(_timed_specs(at_time, app.store.db_now())))
    for number in range(flaky):
        url = f"https://hooks.example.com/orders/{number}"
        plan.add("flaky", [app.enqueue("demo.flaky_webhook", {"url": url})])
    for number in range(doomed):
        plan.add("doomed", [app.enqueue("demo.doomed_export", {"report": f"q{number + 1}"})])
    plan.doomed = doomed
    for region in ("eu", "us")[:keyed]:
        plan.duplicates.append(_enqueue_twice(app, region))
        plan.add("keyed (each enqueued twice)", [plan.duplicates[-1].first])
    return plan


def _immediate_specs(count: int) -> list[JobSpec]:
    return [
        JobSpec("demo.greet", {"name": f"user-{n}"})
        if n % 2 == 0
        else JobSpec("demo.resize_image", {"image": f"photo-{n}.jpg", "width": 640})
        for n in range(count)
    ]


def _delayed_specs(count: int) -> list[JobSpec]:
    return [
        JobSpec("demo.greet", {"name": f"later-{n}"}, delay=timedelta(seconds=1 + 2 * n / count))
        for n in range(count)
    ]


def _timed_specs(count: int, db_now: datetime) -> list[JobSpec]:
    # Aware instants a few seconds ahead of the database clock, as a caller would pass them.
    return [
        JobSpec(
            "demo.send_reminder", {"user_id": n}, run_at=db_now + timedelta(seconds=2 + n / count)
        )
        for n in range(count)
    ]


def _enqueue_twice(app: App, region: str) -> Duplicate:
    key = f"daily-report:{region}"
    first = app.enqueue("demo.daily_report", {"region": region}, key=key)
    second = app.enqueue("demo.daily_report", {"region": region}, key=key)
    return Duplicate(key, first, second)


def plan_view(plan: Plan, where: str) -> RenderableType:
    kinds = ", ".join(f"{count} {kind}" for kind, count in plan.kinds.items())
    lines = [Text(f"enqueued {len(plan.ids)} jobs on {where}: {kinds}")]
    for dup in plan.duplicates:
        lines.append(
            Text(
                f"key {dup.key!r} enqueued twice: job {dup.first.id} "
                f"(created={dup.first.created}), then job {dup.second.id} "
                f"(created={dup.second.created})"
            )
        )
    return Group(*lines)


# -- running ------------------------------------------------------------------------------


class _Progress:
    """Wakes the live view whenever attempts end, so it redraws on events, not a timer."""

    def __init__(self) -> None:
        self.changed = threading.Event()

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (Subscription(AttemptsEnded, lambda event: self.changed.set()),)


def run_worker_live(app: App, plan: Plan, out: Output) -> bool:
    """Run a worker in a thread until every planned job is final; False on the deadline."""
    progress = _Progress()
    options = WorkerOptions(queues=QUEUES, concurrency=8, poll_interval=1.0, shutdown_grace=5.0)
    worker = Worker(app, options, [progress])
    failures: list[BaseException] = []
    thread = threading.Thread(target=_run, args=(worker, failures), name="chronoq-demo-worker")
    thread.start()
    finished, stop_now = False, True
    try:
        finished = _watch(app, plan, out, progress, thread)
        stop_now = False
    finally:
        worker.request_stop(immediate=stop_now)
        thread.join()
    if failures:
        raise failures[0]
    return finished


def _run(worker: Worker, failures: list[BaseException]) -> None:
    try:
        worker.run(install_signal_handlers=False)
    except BaseException as exc:  # handed to the main thread, which raises it
        failures.append(exc)


def _watch(
    app: App, plan: Plan, out: Output, progress: _Progress, thread: threading.Thread
) -> bool:
    started = time.monotonic()
    deadline = started + DEADLINE_SECONDS
    with Live(console=out.console, refresh_per_second=8) as live:
        while True:
            jobs = fetch_jobs(app, plan)
            live.update(progress_view(jobs, app.store.db_now(), time.monotonic() - started))
            if all(job.status.is_final for job in jobs) and len(jobs) == len(plan.ids):
                break
            if time.monotonic() > deadline or not thread.is_alive():
                break
            progress.changed.wait(REFRESH_SECONDS)
            progress.changed.clear()
    if not out.console.is_terminal:
        out.console.line()  # Live leaves the cursor after its last line only on terminals
    return all(job.status.is_final for job in jobs) and len(jobs) == len(plan.ids)


def fetch_jobs(app: App, plan: Plan) -> list[Job]:
    """This run's jobs: on a shared PostgreSQL database, older demo jobs are left out."""
    wanted = set(plan.ids)
    newest = max(wanted) + 1
    jobs: list[Job] = []
    for queue in QUEUES:
        params = JobListParams(queue=queue, before_id=newest, limit=len(wanted))
        jobs += [job for job in app.admin.list_jobs(params) if job.id in wanted]
    return jobs


def progress_view(jobs: Sequence[Job], db_now: datetime, elapsed: float) -> Table:
    rows = Counter(_phase(job, db_now) for job in jobs)
    table = Table(title=f"chronoq demo: {len(jobs)} jobs, {elapsed:4.1f}s", title_justify="left")
    table.add_column("state")
    table.add_column("jobs", justify="right")
    table.add_column("", min_width=BAR_WIDTH)
    for phase, style in _PHASES:
        share = rows[phase] / len(jobs) if jobs else 0.0
        table.add_row(
            Text(phase, style=style),
            str(rows[phase]),
            Text("█" * round(share * BAR_WIDTH), style=style),
        )
    failed = sum(len(job.errors) for job in jobs)
    table.add_row(Text("failed attempts", style="dim"), str(failed), "")
    return table


_PHASES = (
    ("scheduled", "blue"),
    ("due", STATUS_STYLES[JobStatus.PENDING]),
    ("running", STATUS_STYLES[JobStatus.RUNNING]),
    ("done", STATUS_STYLES[JobStatus.DONE]),
    ("dead", STATUS_STYLES[JobStatus.DEAD]),
    ("cancelled", STATUS_STYLES[JobStatus.CANCELLED]),
)


def _phase(job: Job, db_now: datetime) -> str:
    if job.status == JobStatus.PENDING:
        return "scheduled" if job.run_at > db_now else "due"
    return str(job.status)


def _quiet_worker_logs() -> contextlib.AbstractContextManager[None]:
    """Retries and dead jobs are the point of the demo; their warnings would tear the live view."""
    return quiet_logger("chronoq")


# -- the summary --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    counts: Counter[JobStatus]
    expected_done: int
    expected_dead: int
    lateness: list[float]
    flaky_attempts: list[int]
    dead_attempts: list[int]
    duplicates: list[Duplicate]
    elapsed: float

    @classmethod
    def of(cls, jobs: Sequence[Job], plan: Plan, elapsed: float) -> Summary:
        done = [job for job in jobs if job.status == JobStatus.DONE]
        return cls(
            counts=Counter(job.status for job in jobs),
            expected_done=len(plan.ids) - plan.doomed,
            expected_dead=plan.doomed,
            lateness=[_lateness(job) for job in done],
            flaky_attempts=[job.attempts for job in done if job.task == "demo.flaky_webhook"],
            dead_attempts=[job.attempts for job in jobs if job.status == JobStatus.DEAD],
            duplicates=plan.duplicates,
            elapsed=elapsed,
        )

    @property
    def as_expected(self) -> bool:
        duplicates_held = all(
            d.first.created and not d.second.created and d.first.id == d.second.id
            for d in self.duplicates
        )
        return (
            self.counts[JobStatus.DONE] == self.expected_done
            and self.counts[JobStatus.DEAD] == self.expected_dead
            and duplicates_held
        )

    def view(self) -> RenderableType:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for name, value in self._rows():
            grid.add_row(name, value)
        return Group(Text("summary", style="bold underline"), grid)

    def _rows(self) -> Iterator[tuple[str, str]]:
        yield "done", f"{self.counts[JobStatus.DONE]} of {self.expected_done} expected"
        yield (
            "dead",
            (
                f"{self.counts[JobStatus.DEAD]} of {self.expected_dead} expected "
                f"(attempts used: {_listing(self.dead_attempts)})"
            ),
        )
        yield "retried", f"flaky webhooks succeeded on attempt {_listing(self.flaky_attempts)}"
        for dup in self.duplicates:
            verdict = "same job" if dup.first.id == dup.second.id else "DIFFERENT jobs"
            yield (
                "duplicate key",
                (
                    f"{dup.key}: first enqueue created job {dup.first.id}, the second returned "
                    f"job {dup.second.id} with created={dup.second.created} ({verdict})"
                ),
            )
        yield "due → start", self._lateness_text()
        yield "elapsed", f"{self.elapsed:.1f}s"

    def _lateness_text(self) -> str:
        if not self.lateness:
            return "no job finished"
        p50, p99 = percentile(self.lateness, 50), percentile(self.lateness, 99)
        return (
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms over {len(self.lateness)} done "
            "jobs (started_at - run_at, database clock)"
        )


def _lateness(job: Job) -> float:
    assert job.started_at is not None  # a done job has started
    return (job.started_at - job.run_at).total_seconds()


def _listing(values: Sequence[int]) -> str:
    return ", ".join(map(str, sorted(values))) or "-"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
