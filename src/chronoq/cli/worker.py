"""`chronoq worker`: one worker in this process, or a supervisor of several worker processes."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import TextIO

from chronoq.app import App
from chronoq.cli.apps import open_app
from chronoq.cli.invocation import EXIT_OK, Invocation
from chronoq.worker.ledger import JobLedger, Orphans, settle_orphans
from chronoq.worker.supervisor import (
    EXIT_RETIRED,
    SUPERVISOR_PID_ENV,
    Supervisor,
    SupervisorOptions,
)
from chronoq.worker.worker import Worker, WorkerOptions, flush_logs

log = logging.getLogger("chronoq.cli")
LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(process)d]: %(message)s"
ORPHAN_CHECK_SECONDS = 1.0


def worker(run: Invocation) -> int:
    args = run.args
    app = open_app(run.dsn, args.app)
    options = worker_options(args)
    job_worker = Worker(app, options, ledger=JobLedger.from_environment())  # validates them
    configure_logging(args.log_level, run.out.stderr)
    # Fail here, with one clear line, when the database is unreachable or not migrated, rather
    # than in a claim loop that would log and retry forever.
    app.store.job_next_wakeup(job_worker.queues)
    if args.processes > 1:
        app.close()
        return _supervise(run.argv, args.processes, app)
    return _run_in_process(app, job_worker)


def worker_options(args: argparse.Namespace) -> WorkerOptions:
    defaults = WorkerOptions()
    poll: timedelta | None = args.poll_interval
    grace: timedelta | None = args.shutdown_grace
    return WorkerOptions(
        queues=args.queues,
        concurrency=args.concurrency,
        batch_size=args.batch,
        burst=args.burst,
        poll_interval=poll.total_seconds() if poll is not None else defaults.poll_interval,
        shutdown_grace=grace.total_seconds() if grace is not None else defaults.shutdown_grace,
        exit_when_blocked=True,
    )


def configure_logging(level: str, stream: TextIO) -> None:
    """Log to `stream` unless the host program already set logging up."""
    if not logging.getLogger().handlers:
        logging.basicConfig(format=LOG_FORMAT, stream=stream)
    logging.getLogger("chronoq").setLevel(level.upper())


def _run_in_process(app: App, job_worker: Worker) -> int:
    watcher = _stop_when_orphaned(job_worker)
    stats = job_worker.run()
    if watcher is not None:
        watcher.set()
    if stats.stuck or stats.abandoned:
        # Handler threads that outlived their timeout or the grace period are not daemons and
        # cannot be stopped. Exit without joining them: the first case retired this process on
        # purpose (code 75: replace me); in the second their leases expire and the jobs are
        # rescued.
        code = EXIT_RETIRED if stats.stuck else EXIT_OK
        threads = stats.stuck + stats.abandoned
        log.warning("exiting with %d job thread(s) still running (exit code %d)", threads, code)
        flush_logs()
        os._exit(code)
    app.close()
    return EXIT_OK


def _supervise(argv: Sequence[str], processes: int, app: App) -> int:
    child = [sys.executable, "-m", "chronoq", *without_option(argv, "--processes"), "--processes"]

    def on_orphans(orphans: Orphans) -> None:
        settle_orphans(app, orphans)

    try:
        return Supervisor([*child, "1"], SupervisorOptions(processes), on_orphans=on_orphans).run()
    finally:
        app.close()


def without_option(argv: Sequence[str], option: str) -> list[str]:
    """`argv` minus `option VALUE` and `option=VALUE` (the parser allows no abbreviations)."""
    kept: list[str] = []
    skip_value = False
    for token in argv:
        if skip_value:
            skip_value = False
        elif token == option:
            skip_value = True
        elif not token.startswith(option + "="):
            kept.append(token)
    return kept


def _stop_when_orphaned(job_worker: Worker) -> threading.Event | None:
    """Under a supervisor, stop gracefully once it is gone: nobody else would ever stop us.

    The variable is removed so that processes our jobs start do not take it for theirs. The
    supervisor may die before this runs; the first check then stops the worker at once.
    """
    supervisor = os.environ.pop(SUPERVISOR_PID_ENV, "")
    if not supervisor.isdigit():
        return None
    done = threading.Event()

    def watch() -> None:
        while os.getppid() == int(supervisor):
            if done.wait(ORPHAN_CHECK_SECONDS):
                return
        log.warning("the supervisor (pid %s) is gone; stopping", supervisor)
        job_worker.request_stop()

    threading.Thread(target=watch, name="chronoq-orphan-watch", daemon=True).start()
    return done
