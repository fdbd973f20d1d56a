"""The argument parser of the `chronoq` command: every subcommand, its options and its help.

Values are checked while parsing (durations, ids, ISO 8601 instants, JSON payloads), so a bad
value is reported as a usage error that names the option, before any database is opened.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from chronoq.cli.argtypes import (
    DEMO_JOBS,
    demo_job_count,
    duration,
    instant,
    job_id,
    json_object,
    metrics_port,
    name_list,
    positive_int,
    preview_count,
    statuses,
    whole_number,
)
from chronoq.worker.loops import EVENT_LOOPS

LOG_LEVELS = ("debug", "info", "warning", "error")
SUBCOMMANDS = {
    None: "migrate, worker, scheduler, serve, enqueue, jobs, dead, schedule, queue, tier, stats, "
    "processes, demo",
    "jobs": "list, show, cancel",
    "dead": "list, requeue, purge",
    "schedule": "add, list, show, pause, resume, remove, preview",
    "queue": "list, pause, resume, limit, limit-key, unlimit-key, remove",
    "tier": "status",
}


class UsageError(Exception):
    """The command line is malformed; the message says which part and why."""


def missing_command(command: str | None) -> UsageError:
    """The error for `chronoq` or `chronoq jobs` given without the command that follows."""
    where = f"{command} " if command else ""
    return UsageError(f"choose a {where}command: {SUBCOMMANDS[command]} (see --help)")


# argparse reads a word that starts with "-" as a value only when it is a plain negative number
# ("-5", "-0.5"), so `--delay -5m` failed with "expected one argument", which hides what is wrong.
# No option of this command starts with "-" and a digit: any such word is a value, and the
# option's type says what is wrong with it (a duration "must not be negative").
_NEGATIVE_VALUE = re.compile(r"^-\.?\d")


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser that raises `UsageError` instead of printing usage and exiting, and
    takes `-5m` for a value as it takes `-5`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class Renamed(argparse.Action):
    """A flag that was renamed: given it, the command says the new name, not just "unrecognized
    argument". Hidden from --help."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS)
        self.new = new

    def __call__(self, parser: Any, namespace: Any, values: Any, option: str | None = None) -> None:
        raise UsageError(f"{option} is now {self.new}")


def _add_renamed(parser: ArgumentParser, renamed: dict[str, str]) -> None:
    for old, new in renamed.items():
        parser.add_argument(old, action=Renamed, new=new, dest=f"renamed_{old.lstrip('-')}")


# -- the parser -------------------------------------------------------------------------------

Handler = Callable[..., int]


def build_parser(
    handlers: dict[str, Handler], version: str, *, prog: str = "chronoq", app_required: bool = True
) -> ArgumentParser:
    """The whole command tree; `handlers` maps command paths such as "jobs list" to functions.

    A host program (`manage.py chronoq`) names itself with `prog` and, as it supplies the App,
    makes `--app` of `worker` and `scheduler` optional with `app_required=False`."""
    parser = ArgumentParser(
        prog=prog,
        description="chronoq: a job scheduler on PostgreSQL or SQLite.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"chronoq {version}")
    parser.add_argument("--dsn", default=None, help=_DSN_HELP)
    common = ArgumentParser(add_help=False, allow_abbrev=False)
    # SUPPRESS keeps a --dsn given before the command from being reset by the subcommand.
    common.add_argument("--dsn", default=argparse.SUPPRESS, help=_DSN_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)

    def command(group: Any, name: str, path: str, help_text: str) -> ArgumentParser:
        sub: ArgumentParser = group.add_parser(
            name, help=help_text, description=help_text, parents=[common], allow_abbrev=False
        )
        sub.set_defaults(handler=handlers[path], command_path=path)
        return sub

    migrate = command(commands, "migrate", "migrate", "Apply pending database migrations.")
    migrate.add_argument(
        "--to",
        metavar="VERSION",
        default=None,
        help="bring the schema to this migration (name or number, e.g. 0002), applying the "
        "down migrations of newer ones",
    )
    _add_json(migrate)
    _add_worker(command(commands, "worker", "worker", "Run jobs until stopped."), app_required)
    _add_scheduler(
        command(
            commands,
            "scheduler",
            "scheduler",
            "Run the leader-only services (cron, lease rescuer, pruner) when elected.",
        ),
        app_required,
    )
    _add_serve(
        command(commands, "serve", "serve", "Serve the HTTP API, the dashboard and /metrics.")
    )
    _add_enqueue(command(commands, "enqueue", "enqueue", "Enqueue one job; prints its id."))
    _add_jobs(commands, command)
    _add_dead(commands, command)
    _add_schedule(commands, command)
    _add_queue(commands, command)
    _add_tier(commands, command)
    _add_json(command(commands, "stats", "stats", "Count jobs per queue and status."))
    _add_processes(commands, command)
    demo = command(commands, "demo", "demo", "Run a short live demonstration on SQLite.")
    demo.add_argument(
        "--jobs",
        type=demo_job_count,
        default=40,
        metavar="N",
        help=f"how many jobs, {DEMO_JOBS[0]} to {DEMO_JOBS[1]} (default 40)",
    )
    return parser


_DSN_HELP = "database: sqlite:///path.db or postgresql://user@host/db (env CHRONOQ_DSN)"


def _add_json(parser: ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON (see docs/cli.md)")


def _add_worker(worker: ArgumentParser, app_required: bool) -> None:
    _add_app(worker, app_required)
    worker.add_argument(
        "--queues", type=name_list, metavar="A,B", help="queues to serve (default: all the app's)"
    )
    worker.add_argument(
        "--concurrency", type=positive_int, default=10, metavar="N", help="jobs at once"
    )
    worker.add_argument(
        "--batch", type=positive_int, metavar="N", help="most jobs claimed per round trip"
    )
    worker.add_argument("--burst", action="store_true", help="exit 0 once no job is due")
    worker.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="the worker's event loop (auto: uvloop when installed)",
    )
    worker.add_argument(
        "--processes",
        type=positive_int,
        default=1,
        metavar="M",
        help="run M worker processes under a supervisor",
    )
    worker.add_argument(
        "--shutdown-grace",
        type=duration,
        metavar="SECONDS",
        help="how long in-flight jobs may finish after SIGTERM (default 30s)",
    )
    worker.add_argument(
        "--poll-interval",
        type=duration,
        metavar="SECONDS",
        help="longest pause between looks at the database (default 5s)",
    )
    _add_observability(worker, "with --processes M, the workers take ports N to N+M-1")


def _add_observability(parser: ArgumentParser, port_note: str = "") -> None:
    """--log-level, --log-format and the metrics endpoint of the long-running commands."""
    _add_logging(parser)
    note = f"; {port_note}" if port_note else ""
    parser.add_argument(
        "--metrics-port",
        type=metrics_port,
        metavar="N",
        help=f"serve Prometheus metrics on http://HOST:N/metrics (0: any free port){note}",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address the metrics endpoint listens on (default 127.0.0.1)",
    )


def _add_serve(serve: ArgumentParser) -> None:
    serve.add_argument(
        "--app",
        metavar="MODULE:APP",
        help="the App whose tasks the API checks jobs against (default: any task name)",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; others need tokens configured)",
    )
    serve.add_argument(
        "--port", type=metrics_port, default=8080, metavar="N", help="port (default 8080)"
    )
    serve.add_argument(
        "--secure-cookies",
        action="store_true",
        help="send the dashboard's session cookie over HTTPS only (behind a TLS proxy)",
    )
    serve.add_argument(
        "--header-timeout",
        type=duration,
        default=timedelta(seconds=10),
        metavar="DURATION",
        help="close a connection whose request headers take longer (default 10s)",
    )
    serve.add_argument(
        "--body-timeout",
        type=duration,
        default=timedelta(seconds=10),
        metavar="DURATION",
        help="refuse (408) a request body that takes longer to arrive (default 10s)",
    )
    serve.add_argument(
        "--max-connections",
        type=positive_int,
        default=100,
        metavar="N",
        help="connections served at once; past it, requests get 503 (default 100)",
    )
    _add_logging(serve)


def _add_logging(parser: ArgumentParser) -> None:
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="json: one object per line, with the job's fields (default text)",
    )


def _add_enqueue(enqueue: ArgumentParser) -> None:
    enqueue.add_argument("task", metavar="TASK")
    enqueue.add_argument("--payload", type=json_object, metavar="JSON", help="a JSON object")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay", type=duration, help="run after this long: 10s, 5m, 2h")
    when.add_argument(
        "--run-at",
        type=instant,
        metavar="ISO8601",
        help="run at this instant (with its UTC offset)",
    )
    enqueue.add_argument("--queue")
    enqueue.add_argument("--key", help="idempotency key, unique among live jobs")
    enqueue.add_argument("--max-attempts", type=positive_int, metavar="N")
    enqueue.add_argument("--priority", type=whole_number, metavar="N", help="higher runs first")
    enqueue.add_argument(
        "--misfire", choices=("run_late", "skip"), help="skip: end skipped if picked up late"
    )
    enqueue.add_argument(
        "--misfire-grace", type=duration, metavar="DURATION", help="how late still runs (1m)"
    )
    enqueue.add_argument("--rate-key", metavar="KEY", help="the key its rate limit counts on")
    # Text, checked by enqueue itself: its error names the option and the rule (positive,
    # with --key) as the Python API's does.
    enqueue.add_argument(
        "--unique-for",
        metavar="DURATION",
        help="with --key: return the job that took the key within this period (1h), even done",
    )
    enqueue.add_argument(
        "--app", metavar="MODULE:APP", help="check the task and payload against this App"
    )
    _add_renamed(enqueue, {"--at": "--run-at"})
    _add_json(enqueue)


def _add_jobs(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    jobs = commands.add_parser("jobs", help="List, show and cancel jobs.", allow_abbrev=False)
    group = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND")
    listing = command(group, "list", "jobs list", "List jobs, newest first.")
    listing.add_argument(
        "--status", type=statuses, action="extend", metavar="S[,S]", help="filter by status"
    )
    listing.add_argument("--queue")
    listing.add_argument("--task")
    listing.add_argument("--limit", type=positive_int, default=50, metavar="N")
    _add_json(listing)
    show = command(group, "show", "jobs show", "Show one job and its errors.")
    show.add_argument("id", type=job_id, metavar="ID")
    _add_json(show)
    cancel = command(group, "cancel", "jobs cancel", "Cancel a pending or running job.")
    cancel.add_argument("id", type=job_id, metavar="ID")
    _add_json(cancel)


def _add_dead(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    dead = commands.add_parser(
        "dead", help="Inspect, requeue and purge dead jobs.", allow_abbrev=False
    )
    group = dead.add_subparsers(dest="dead_command", metavar="COMMAND")
    listing = command(group, "list", "dead list", "List dead jobs, newest first.")
    listing.add_argument("--queue")
    listing.add_argument("--limit", type=positive_int, default=50, metavar="N")
    _add_json(listing)
    requeue = command(group, "requeue", "dead requeue", "Give dead jobs a new set of attempts.")
    requeue.add_argument("ids", type=job_id, nargs="*", metavar="ID")
    requeue.add_argument("--all", action="store_true", help="every dead job (of --queue)")
    requeue.add_argument("--queue")
    _add_json(requeue)
    purge = command(group, "purge", "dead purge", "Delete dead jobs.")
    purge.add_argument("ids", type=job_id, nargs="*", metavar="ID")
    purge.add_argument(
        "--all", action="store_true", help="every dead job (of --queue, dead --older-than)"
    )
    purge.add_argument("--older-than", type=duration, help="only those dead this long: 7d")
    purge.add_argument("--queue")
    _add_json(purge)


def _add_app(parser: ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "--app",
        required=required,
        metavar="MODULE:APP",
        help="the App, e.g. myproject.tasks:app"
        + ("" if required else " (default: the project's own)"),
    )


def _add_scheduler(scheduler: ArgumentParser, app_required: bool) -> None:
    _add_app(scheduler, app_required)
    scheduler.add_argument(
        "--retention",
        type=duration,
        metavar="DURATION",
        help="delete finished jobs this old (default 7d)",
    )
    scheduler.add_argument(
        "--lookahead",
        type=duration,
        metavar="DURATION",
        help="enqueue ticks this far ahead of their time (default 5s)",
    )
    _add_observability(scheduler)


def _add_schedule(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    schedule = commands.add_parser(
        "schedule", help="Add, list, pause and preview recurring schedules.", allow_abbrev=False
    )
    group = schedule.add_subparsers(dest="schedule_command", metavar="COMMAND")
    add = command(group, "add", "schedule add", "Add or replace a schedule.")
    add.add_argument("name", metavar="NAME")
    add.add_argument("cadence", metavar="CADENCE", help='cron ("0 9 * * *") or "every 30s"')
    add.add_argument("--task", required=True)
    add.add_argument("--zone", default="UTC", metavar="ZONE", help="IANA time zone (UTC)")
    add.add_argument("--payload", type=json_object, metavar="JSON", help="a JSON object")
    add.add_argument("--queue")
    add.add_argument("--priority", type=whole_number, metavar="N")
    add.add_argument(
        "--misfire",
        default="coalesce",
        metavar="POLICY",
        help="run_late, skip, coalesce (default) or catch_up",
    )
    add.add_argument(
        "--misfire-grace", metavar="DURATION", help="how late a tick still counts as on time (1m)"
    )
    add.add_argument("--catch-up", type=positive_int, metavar="N", help="with catch_up")
    add.add_argument("--jitter", metavar="DURATION", help="spread each run over this window")
    add.add_argument("--app", metavar="MODULE:APP", help="check the task and payload")
    _add_renamed(add, {"--tz": "--zone", "--grace": "--misfire-grace"})
    _add_json(add)
    _add_json(command(group, "list", "schedule list", "List schedules."))
    for name, text in (
        ("show", "Show a schedule: its next ticks and what it fired."),
        ("pause", "Pause a schedule; its ticks not yet due are cancelled."),
        ("resume", "Resume a schedule from now on."),
        ("remove", "Remove a schedule and cancel its pending jobs."),
    ):
        sub = command(group, name, f"schedule {name}", text)
        sub.add_argument("name", metavar="NAME")
        _add_json(sub)
    preview = command(group, "preview", "schedule preview", "Print the next fire instants.")
    preview.add_argument("cadence", metavar="CADENCE", help='cron ("0 9 * * *") or "every 30s"')
    preview.add_argument("--zone", default="UTC", metavar="ZONE", help="IANA time zone (UTC)")
    preview.add_argument("--from", dest="start", type=instant, metavar="ISO8601")
    preview.add_argument("--count", type=preview_count, default=5, metavar="N")
    _add_renamed(preview, {"--tz": "--zone"})
    _add_json(preview)


def _add_processes(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    listing = command(
        commands,
        "processes",
        "processes",
        "List the live workers, schedulers and servers (the fleet registry).",
    )
    listing.add_argument(
        "--all",
        action="store_true",
        help="also those that stopped or stopped refreshing their record in the last day",
    )
    _add_json(listing)


def _add_tier(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    tier = commands.add_parser(
        "tier", help="Inspect tiered dispatch (partitions, leaders, Redis).", allow_abbrev=False
    )
    group = tier.add_subparsers(dest="tier_command", metavar="COMMAND")
    _add_json(
        command(
            group,
            "status",
            "tier status",
            "Per partition: leader, epoch, timers staged and due, stream length and lag.",
        )
    )


def _add_queue(commands: Any, command: Callable[..., ArgumentParser]) -> None:
    queue = commands.add_parser(
        "queue", help="Pause, resume and rate-limit queues.", allow_abbrev=False
    )
    group = queue.add_subparsers(dest="queue_command", metavar="COMMAND")
    _add_json(command(group, "list", "queue list", "List queue settings."))
    pause = command(group, "pause", "queue pause", "Stop claiming from a queue.")
    pause.add_argument("queue", metavar="QUEUE")
    _add_create(pause)
    _add_json(pause)
    resume = command(group, "resume", "queue resume", "Claim again.")
    resume.add_argument("queue", metavar="QUEUE")
    _add_json(resume)
    limit = command(group, "limit", "queue limit", "Set (or, without options, clear) limits.")
    limit.add_argument("queue", metavar="QUEUE")
    _add_create(limit)
    limit.add_argument("--rate", metavar="RATE", help="jobs per time: 200/s, 5000/m")
    limit.add_argument("--burst", type=float, metavar="N", help="bucket size (50 ms of rate)")
    limit.add_argument("--concurrency", type=positive_int, metavar="N", help="most running")
    _add_json(limit)
    key = command(group, "limit-key", "queue limit-key", "Rate-limit each matching rate key.")
    key.add_argument("queue", metavar="QUEUE")
    key.add_argument("pattern", metavar="PATTERN", help="a glob: customer:*")
    key.add_argument("--rate", required=True, metavar="RATE")
    key.add_argument("--burst", type=float, metavar="N")
    _add_create(key)
    _add_json(key)
    unkey = command(group, "unlimit-key", "queue unlimit-key", "Remove a key limit.")
    unkey.add_argument("queue", metavar="QUEUE")
    unkey.add_argument("pattern", metavar="PATTERN")
    _add_json(unkey)
    remove = command(group, "remove", "queue remove", "Delete the settings of an idle queue.")
    remove.add_argument("queue", metavar="QUEUE")
    _add_json(remove)


def _add_create(sub: ArgumentParser) -> None:
    sub.add_argument(
        "--create",
        action="store_true",
        help="store settings for a queue no task, job or setting uses yet",
    )
