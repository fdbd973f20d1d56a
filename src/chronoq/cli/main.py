"""The `chronoq` command: parse, run one command, and turn failures into one line and an exit code.

Exit codes: 0 success; 1 the command failed (database unreachable, job not found, some jobs not
requeued, ...); 2 the input is wrong (arguments, settings, DSN, a job refused at enqueue); 130
interrupted. Errors never print a DSN's password, nor a traceback of chronoq's own code: the one
traceback shown is that of the user's module when importing `--app` raised, from its first frame
on, above the error line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from chronoq import __version__
from chronoq.cli import admin, processes, schedules, tier
from chronoq.cli.apps import AppImportFailed, Host, existing_store_required, hosted
from chronoq.cli.demo import demo
from chronoq.cli.invocation import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Invocation,
)
from chronoq.cli.output import Output, quiet_logger
from chronoq.cli.parser import Handler, UsageError, build_parser, missing_command
from chronoq.cli.worker import worker
from chronoq.errors import ChronoqError, ConfigError, EnqueueError, ExtraMissing, InvalidDuration
from chronoq.storage.dsn import redact

# Errors that mean "what you asked for is malformed", as opposed to "it could not be done".
_INPUT_ERRORS = (ConfigError, EnqueueError, InvalidDuration)


# What `pip install 'chronoq[server]'` adds; the core install (and every other command) does
# without them.
SERVER_MODULES = frozenset(
    {"fastapi", "starlette", "uvicorn", "jinja2", "multipart", "python_multipart", "itsdangerous"}
)


def serve(run: Invocation) -> int:
    """`chronoq serve`, imported when run: it needs the server extra, which a producer's install
    may lack, and FastAPI and uvicorn would add about 0.4 s to the start of every other command."""
    try:
        from chronoq.cli.serve import serve as run_serve
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in SERVER_MODULES:
            raise
        raise ExtraMissing("chronoq serve", "server") from None
    return run_serve(run)


HANDLERS: dict[str, Handler] = {
    "migrate": admin.migrate,
    "worker": worker,
    "enqueue": admin.enqueue,
    "jobs list": admin.jobs_list,
    "jobs show": admin.jobs_show,
    "jobs cancel": admin.jobs_cancel,
    "dead list": admin.dead_list,
    "dead requeue": admin.dead_requeue,
    "dead purge": admin.dead_purge,
    "scheduler": schedules.scheduler,
    "serve": serve,
    "schedule add": schedules.schedule_add,
    "schedule list": schedules.schedule_list,
    "schedule show": schedules.schedule_show,
    "schedule pause": schedules.schedule_pause,
    "schedule resume": schedules.schedule_resume,
    "schedule remove": schedules.schedule_remove,
    "schedule preview": schedules.schedule_preview,
    "queue list": schedules.queue_list,
    "queue pause": schedules.queue_pause,
    "queue resume": schedules.queue_resume,
    "queue limit": schedules.queue_limit,
    "queue limit-key": schedules.queue_limit_key,
    "queue unlimit-key": schedules.queue_unlimit_key,
    "queue remove": schedules.queue_remove,
    "tier status": tier.tier_status,
    "processes": processes.processes,
    "stats": admin.stats,
    "demo": demo,
}


# The commands that look at a store, or change what it already holds, without adding to it: on a
# SQLite file that is not there they stop with one line (exit code 1, as for a database that
# cannot be reached) instead of creating an empty database.
# The others may create one: migrate, enqueue and `schedule add` add to it, `queue pause` and
# `queue limit` store settings ahead of the first job, and the long-running processes (worker,
# scheduler, serve, whose API enqueues) start on a fresh file. `schedule preview` and `tier
# status` (whose tiered dispatch runs on PostgreSQL only) open no SQLite file.
NEEDS_EXISTING_STORE = frozenset(
    {
        "jobs list",
        "jobs show",
        "jobs cancel",
        "dead list",
        "dead requeue",
        "dead purge",
        "stats",
        "schedule list",
        "schedule show",
        "schedule pause",
        "schedule resume",
        "schedule remove",
        "queue list",
        "queue resume",
        "queue remove",
        "processes",
    }
)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    host: Host | None = None,
) -> int:
    """Run one command; returns its exit code (the console script exits with it). A `host`
    program (`manage.py chronoq`) runs the same commands with an App of its own."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    out = Output.on(stdout or sys.stdout, stderr or sys.stderr)
    try:
        args = _parse(arguments, out, host)
        if args is None:
            return 0  # --help or --version was printed
        with contextlib.ExitStack() as scope:
            scope.enter_context(hosted(host))
            if args.command_path in NEEDS_EXISTING_STORE:
                scope.enter_context(existing_store_required())
            if args.command not in ("worker", "scheduler", "serve"):
                scope.enter_context(_connection_retries_unlogged())
            return int(args.handler(Invocation(args, out, arguments)))
    except UsageError as exc:
        out.error(_scrub(str(exc), arguments))
        return EXIT_USAGE
    except ChronoqError as exc:
        if isinstance(exc, AppImportFailed):
            out.stderr.write(_scrub(exc.user_traceback, arguments))
        out.error(_scrub(str(exc), arguments))
        return EXIT_USAGE if isinstance(exc, _INPUT_ERRORS) else EXIT_FAILURE
    except KeyboardInterrupt:
        out.error("interrupted")
        return EXIT_INTERRUPTED


def _parse(arguments: list[str], out: Output, host: Host | None) -> argparse.Namespace | None:
    _refuse_undecodable(arguments)
    if host is None:
        parser = build_parser(HANDLERS, __version__)
    else:
        parser = build_parser(HANDLERS, __version__, prog=host.prog, app_required=False)
    try:
        # argparse prints --help and --version to sys.stdout; send them where we were told.
        with contextlib.redirect_stdout(out.stdout):
            args = parser.parse_args(arguments)
    except SystemExit as exc:
        if exc.code:
            raise UsageError(str(exc.code)) from None
        return None
    if getattr(args, "handler", None) is None:
        raise missing_command(getattr(args, "command", None))
    for name, value in (host.defaults if host is not None else {}).items():
        if getattr(args, name, value) is None:
            setattr(args, name, value)
    return args


def _refuse_undecodable(arguments: list[str]) -> None:
    """Every argument must be text a database can store. A shell hands over bytes that are not
    UTF-8 as lone surrogates, which neither store can encode; NUL only arrives from code."""
    for argument in arguments:
        if "\x00" in argument:
            raise UsageError(f"argument {redact(argument)!r} contains a NUL character")
        if not argument.isascii():
            try:
                argument.encode("utf-8")
            except UnicodeEncodeError:
                raise UsageError(f"argument {redact(argument)!r} is not valid UTF-8") from None


def _connection_retries_unlogged() -> contextlib.AbstractContextManager[None]:
    """psycopg's pool logs every failed connection attempt; a command reports the failure once.

    The worker is left alone: it configures logging, and a long-running process should log them.
    """
    return quiet_logger("psycopg")


def _scrub(message: str, arguments: list[str]) -> str:
    """Belt and braces: any argument (or CHRONOQ_DSN) a message quotes is shown redacted."""
    for text in [*arguments, os.environ.get("CHRONOQ_DSN", "")]:
        safe = redact(text)
        if safe != text:
            message = message.replace(text, safe)
    return message
