"""`chronoq worker`: one worker in this process, or a supervisor of several worker processes.

With `--metrics-port N` a lone worker serves /metrics on N. Under `--processes M` the supervisor
runs no jobs and serves nothing; each child serves its own counters on N + its slot (N to
N+M-1), and a restarted child takes its slot's port again. Prometheus sums them across targets.
(One port for the whole fleet would need prometheus-client's multiprocess mode: files shared
between processes, cleaned up as children die, and gauges that cannot simply be summed.)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, TextIO

from chronoq.app import App
from chronoq.cli.apps import current_host, open_app
from chronoq.cli.invocation import EXIT_OK, Invocation
from chronoq.errors import ConfigError
from chronoq.observability import logs
from chronoq.storage.dsn import with_session_name
from chronoq.worker.ledger import JobLedger, Orphans, settle_orphans
from chronoq.worker.options import default_worker_id
from chronoq.worker.supervisor import (
    EXIT_RETIRED,
    SUPERVISOR_PID_ENV,
    WORKER_SLOT_ENV,
    Supervisor,
    SupervisorOptions,
)
from chronoq.worker.watchdog import flush_logs
from chronoq.worker.worker import Worker, WorkerOptions

if TYPE_CHECKING:
    from chronoq.observability.metrics import Metrics

log = logging.getLogger("chronoq.cli")
ORPHAN_CHECK_SECONDS = 1.0
MAX_PORT = 65535


def worker(run: Invocation) -> int:
    args = run.args
    _check_metrics_ports(args.metrics_port, args.processes)
    # The slot is read, and removed, first: processes the jobs start must not take it for theirs.
    port = _slot_port(args.metrics_port, os.environ.pop(WORKER_SLOT_ENV, ""))
    app = open_app(run.dsn, args.app)
    if args.processes == 1:
        ensure_metrics(app, port)  # before the Worker, which counts on the app's
    options = worker_options(args)
    ledger = JobLedger.from_environment()
    if ledger.enabled:
        options = _name_sessions(app, options)
    job_worker = Worker(app, options, ledger=ledger)  # validates them
    configure_logging(args.log_level, run.out.stderr, args.log_format)
    # Fail here, with one clear line, when the database is unreachable or not migrated, rather
    # than in a claim loop that would log and retry forever.
    app.store.job_next_wakeup(job_worker.queues)
    if args.processes > 1:
        app.close()
        return _supervise(run.argv, args.processes, app)
    try:
        metrics = serve_metrics(app, port, args.metrics_host)
    except ConfigError:
        app.close()
        raise
    try:
        return _run_in_process(app, job_worker)
    finally:
        if metrics is not None:
            metrics.close()


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
        tune_gc=True,
        event_loop=args.event_loop,
    )


def _name_sessions(app: App, options: WorkerOptions) -> WorkerOptions:
    """A supervised child's database sessions carry its worker id, chosen here, so that once it
    dies the supervisor can end what it left running on the server before settling its jobs
    (`chronoq.worker.ledger.settle_orphans`)."""
    worker_id = options.worker_id or default_worker_id()
    app.close()  # a store the app module opened at import has unnamed sessions
    app.config = app.config.with_dsn(with_session_name(app.config.dsn, worker_id))
    return replace(options, worker_id=worker_id)


def configure_logging(level: str, stream: TextIO, fmt: str = "text") -> None:
    """Log to `stream`, as text or JSON lines, unless the host program already set logging
    up (see `chronoq.observability.logs.configure_logging`)."""
    logs.configure_logging(level, stream, fmt)


def serve_metrics(
    app: App, port: int | None, host: str, *, watch_store: bool = False
) -> Metrics | None:
    """Serve the app's metrics on `host:port` (None: no endpoint, nothing served); with
    `watch_store`, queue depths are read from the store at each scrape."""
    metrics = ensure_metrics(app, port)
    if metrics is None or port is None:
        return None
    if watch_store:
        watch_app(metrics, app)
    bound = metrics.serve(port, host)
    log.info(
        "serving metrics on http://%s:%d/metrics",
        host,
        bound,
        extra={"action": "metrics.serve", "host": host, "port": bound},
    )
    return metrics


def watch_app(metrics: Metrics, app: App) -> None:
    """Queue depths read from the store at each scrape, and with tiered dispatch the state of
    every partition read from Redis."""
    metrics.watch_store(lambda: app.store)
    if app.config.dispatch == "tiered":
        from chronoq.tier.metrics import watch
        from chronoq.tier.status import status_reader

        watch(metrics, status_reader(app.runtime()))


def ensure_metrics(app: App, port: int | None) -> Metrics | None:
    """Give the app a Metrics when an endpoint will serve one (keeping one the app has)."""
    if port is not None and app.metrics is None:
        # Imported here: prometheus-client costs every other command 0.1 s to import.
        from chronoq.observability.metrics import Metrics

        app.metrics = Metrics()
    return app.metrics if port is not None else None


def _check_metrics_ports(port: int | None, processes: int) -> None:
    if port and port + processes - 1 > MAX_PORT:
        raise ConfigError(
            f"--metrics-port {port} with --processes {processes}: the workers take ports "
            f"{port} to {port + processes - 1}, past {MAX_PORT}; choose a lower port"
        )


def _slot_port(port: int | None, slot: str) -> int | None:
    """A supervised child's port: the base port plus its slot (0 stays 0: any free port)."""
    if not port or not slot.isdigit():
        return port
    return port + int(slot)


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
    host = current_host()
    program = host.command if host is not None else (sys.executable, "-m", "chronoq")
    child = [*program, *without_option(argv, "--processes"), "--processes"]

    def on_orphans(orphans: Orphans) -> None:
        settle_orphans(app.store, orphans)

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
