"""The chaos suite's workload: an app whose handlers record every execution in a table of
effects (job id, attempt, fencing token, worker, start and end on the database clock), so the
checker can see each run of each job, including runs whose results were thrown away.

Worker processes import it as `tests.chaos.workload:app`; the database comes from CHRONOQ_DSN.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg

import chronoq

LEASE = 2.0  # seconds: short, so crashed work is rescued within the test's patience
BACKOFF = chronoq.Backoff(base=0.2, cap=2.0)
MAX_ATTEMPTS = 40  # enough that faults alone never exhaust a job; its failures are its own
POISON_ATTEMPTS = 3  # a poison job must end dead after exactly this many

app = chronoq.App()


class FlakyError(Exception):
    """A failure the workload asks for: the job fails its first attempts on purpose."""


class _Effects:
    """One connection per process, reopened when a fault cut it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None

    def _execute(self, sql: str, args: tuple[Any, ...]) -> Any:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(os.environ["CHRONOQ_DSN"], autocommit=True)
            try:
                return self._conn.execute(sql, args).fetchone()
            except psycopg.OperationalError:
                self._conn.close()
                raise

    def start(self, ctx: chronoq.JobContext) -> int:
        row = self._execute(
            "INSERT INTO chaos_effects (job_id, attempt, token, worker, scheduled_at) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (ctx.id, ctx.attempt, ctx.lease_token, f"{os.getpid()}", ctx.scheduled_at),
        )
        return int(row[0])

    def end(self, effect_id: int) -> None:
        self._execute(
            "UPDATE chaos_effects SET ended_at = clock_timestamp() WHERE id = %s RETURNING id",
            (effect_id,),
        )


EFFECTS = _Effects()


@app.task(queue="chaos", lease=LEASE, max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
def work(ctx: chronoq.JobContext, ms: int, fail_first: int = 0) -> None:
    effect = EFFECTS.start(ctx)
    threading.Event().wait(ms / 1000)  # the work itself
    EFFECTS.end(effect)
    if ctx.attempt <= fail_first:
        raise FlakyError(f"attempt {ctx.attempt} of {fail_first} planned failures")


@app.task(queue="chaos", lease=LEASE, max_attempts=POISON_ATTEMPTS, backoff=BACKOFF)
def poison(ctx: chronoq.JobContext) -> None:
    """Takes its worker process down, every time."""
    EFFECTS.start(ctx)
    os._exit(3)


@app.schedule("every 1s", misfire="run_late", misfire_grace="1h")
@app.task(queue="ticks", lease=LEASE, max_attempts=MAX_ATTEMPTS)
def tick(ctx: chronoq.JobContext) -> None:
    EFFECTS.end(EFFECTS.start(ctx))
