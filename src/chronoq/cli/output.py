"""Where commands write: rich text for people, stable JSON for programs, one line per error.

Commands never touch `sys.stdout` themselves; they get an `Output` built on the streams `main`
was given, so tests and embedding programs can capture everything a command says.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from chronoq.core.jobs import Job, JobStatus, Stat, stats_json

STATUS_STYLES = {
    JobStatus.PENDING: "cyan",
    JobStatus.RUNNING: "yellow",
    JobStatus.DONE: "green",
    JobStatus.DEAD: "red",
    JobStatus.CANCELLED: "magenta",
    JobStatus.SKIPPED: "bright_black",
}


@dataclass(frozen=True, slots=True)
class Output:
    stdout: TextIO
    stderr: TextIO
    console: Console

    @classmethod
    def on(cls, stdout: TextIO, stderr: TextIO) -> Output:
        # markup off: job data such as "[1, 2]" or "[bold]" must print as written.
        console = Console(file=stdout, markup=False, highlight=False, emoji=False)
        return cls(stdout, stderr, console)

    def line(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def json(self, value: object) -> None:
        """One JSON document on one line, so output can be piped to `jq` or read line by line."""
        self.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")

    def note(self, text: str) -> None:
        """A remark for people that must not mix with the result on stdout."""
        self.stderr.write(text + "\n")

    def error(self, message: str) -> None:
        first_line = message.strip().splitlines()[0] if message.strip() else "failed"
        self.stderr.write(f"error: {first_line}\n")

    def show(self, renderable: RenderableType) -> None:
        self.console.print(renderable)


# -- renderers --------------------------------------------------------------------------------


def format_time(moment: datetime | None) -> str:
    """Full precision with its offset, for the detail view."""
    if moment is None:
        return "-"
    return moment.isoformat(sep=" ", timespec="milliseconds")


def short_time(moment: datetime | None) -> str:
    """To the second in UTC, for table columns whose header says UTC."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: JobStatus) -> Text:
    return Text(str(status), style=STATUS_STYLES[status])


def jobs_table(jobs: Sequence[Job]) -> Table:
    table = Table(title=f"{len(jobs)} job(s)", title_justify="left")
    for column in ("id", "queue", "task", "status", "attempts", "run at (UTC)", "key"):
        table.add_column(column, justify="right" if column == "id" else "left")
    for job in jobs:
        table.add_row(
            str(job.id),
            job.queue,
            job.task,
            status_text(job.status),
            f"{job.attempts}/{job.max_attempts or 'task'}",
            short_time(job.run_at),
            job.key or "",
        )
    return table


def dead_table(jobs: Sequence[Job]) -> Table:
    table = Table(title=f"{len(jobs)} dead job(s)", title_justify="left")
    for column in ("id", "queue", "task", "attempts", "died at (UTC)", "last error"):
        table.add_column(column, justify="right" if column == "id" else "left")
    for job in jobs:
        table.add_row(
            str(job.id),
            job.queue,
            job.task,
            str(job.attempts),
            short_time(job.finished_at),
            last_error(job),
        )
    return table


def last_error(job: Job) -> str:
    if not job.errors:
        return ""
    error = job.errors[-1]
    return f"{error.get('error', '')}: {error.get('message', '')}".strip(": ")


def job_detail(job: Job) -> RenderableType:
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    for name, value in _detail_rows(job):
        fields.add_row(name, value)
    if not job.errors:
        return fields
    errors = Table(title="errors", title_justify="left")
    for column in ("attempt", "outcome", "error", "worker"):
        errors.add_column(column)
    for error in job.errors:
        errors.add_row(
            str(error.get("attempt", "")),
            str(error.get("outcome", "")),
            f"{error.get('error', '')}: {error.get('message', '')}",
            str(error.get("worker", "")),
        )
    return Group(fields, Text(), errors, Text(job.errors[-1].get("traceback", "")))


def _detail_rows(job: Job) -> Iterable[tuple[str, str | Text]]:
    yield "id", str(job.id)
    yield "task", job.task
    yield "queue", job.queue
    yield "status", status_text(job.status)
    yield "payload", json.dumps(job.payload, ensure_ascii=False)
    yield "key", job.key or "-"
    yield "priority", str(job.priority)
    allowed = job.max_attempts or "the task's setting (decided by the worker)"
    yield "attempts", f"{job.attempts} of {allowed}"
    yield "run at", format_time(job.run_at)
    yield "created at", format_time(job.created_at)
    yield "started at", format_time(job.started_at)
    yield "finished at", format_time(job.finished_at)
    yield "worker", job.worker_id or "-"
    yield (
        "lease",
        f"{job.lease_seconds:g}s, token {job.lease_token}, until " + format_time(job.locked_until),
    )
    if job.fence_rejections:
        yield "refused writes", f"{job.fence_rejections} (stale lease tokens: a worker lost it)"
    if job.progress is not None:
        yield "progress", progress_text(job.progress, job.progress_note)
    if job.status is JobStatus.DONE:
        yield "output", json.dumps(job.output, ensure_ascii=False)


def progress_text(fraction: float, note: str | None) -> str:
    """`40% (3 of 8 files)`."""
    percent = f"{fraction * 100:.0f}%"
    return f"{percent} ({note})" if note else percent


def stats_table(stats: Iterable[Stat]) -> Table:
    counts = stats_json(stats)
    table = Table(title="jobs per queue and status", title_justify="left")
    table.add_column("queue")
    for status in JobStatus:
        table.add_column(str(status), justify="right", style=STATUS_STYLES[status])
    table.add_column("total", justify="right", style="bold")
    for queue, row in [*counts["queues"].items(), ("all queues", counts["totals"])]:
        table.add_row(queue, *(str(row[str(s)]) for s in JobStatus), str(row["total"]))
    return table


@contextlib.contextmanager
def quiet_logger(name: str) -> Iterator[None]:
    """Raise logger `name` to ERROR for the block, then restore its level."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
