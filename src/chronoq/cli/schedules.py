"""Commands for time: `schedule ...`, `queue ...` and `scheduler`.

The administering ones parse their arguments, call the admin API (`app.admin`) and print what
it answered; a queue nobody knows is a usage error here (exit 2), any other error of the admin
one line and exit 1 (`chronoq.cli.main`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from rich.table import Table

from chronoq.cli.apps import open_app
from chronoq.cli.invocation import EXIT_OK, Invocation
from chronoq.cli.parser import UsageError
from chronoq.cli.worker import configure_logging, ensure_metrics, serve_metrics
from chronoq.core.cron import parse_cadence, preview
from chronoq.core.durations import format_duration
from chronoq.core.schedules import Schedule
from chronoq.core.timetext import schedule_times
from chronoq.errors import InvalidSchedule, QueueNotFound, ScheduleNotFound
from chronoq.fleet.view import next_fire, scheduler_warning
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.storage.base import QueueSettings

SHOW_NEXT = 5


# -- schedule ---------------------------------------------------------------------------------


def schedule_add(run: Invocation) -> int:
    args = run.args
    with open_app(run.dsn, args.app) as app:
        spec = app.schedule_spec(
            name=args.name,
            cadence=args.cadence,
            task=args.task,
            zone=args.zone,
            payload=args.payload,
            queue=args.queue,
            priority=args.priority,
            misfire=args.misfire,
            misfire_grace=args.misfire_grace,
            catch_up=args.catch_up,
            jitter=args.jitter,
        )
        created = app.add_schedule(spec)
        stored = app.admin.get_schedule(spec.name)
    if run.wants_json:
        run.out.json({"created": created, "schedule": stored.to_json()})
    else:
        run.out.line(f"{'added' if created else 'replaced'} schedule {spec.name}")
        _show_next(run, stored)
    return EXIT_OK


def schedule_list(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        schedules = app.admin.list_schedules()
        fleet = app.admin.list_processes()
    warning = scheduler_warning(schedules, fleet)
    if warning is not None:
        run.out.note(f"warning: {warning.text}")
    if run.wants_json:
        run.out.json([schedule.to_json() for schedule in schedules])
        return EXIT_OK
    table = Table(title="schedules", title_justify="left")
    for column in ("name", "cadence", "task (queue)", "misfire", "next tick"):
        table.add_column(column)
    table.add_column("fired/late/skipped/coalesced", justify="right")
    for s in schedules:
        table.add_row(
            s.name,
            f"{s.cadence} ({s.zone})",
            f"{s.task} ({s.queue})",
            _misfire_text(s),
            "paused" if s.paused else _next_text(s, None if warning is None else fleet.db_now),
            f"{s.fired}/{s.late}/{s.skipped}/{s.coalesced}",
        )
    run.out.show(table)
    return EXIT_OK


def schedule_show(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        schedule = app.admin.get_schedule(run.args.name)
    if run.wants_json:
        run.out.json(schedule.to_json() | {"next": [t.isoformat() for t in _upcoming(schedule)]})
        return EXIT_OK
    rows = [
        ("cadence", f"{schedule.cadence} ({schedule.zone})"),
        ("task", f"{schedule.task} on queue {schedule.queue}, priority {schedule.priority}"),
        ("payload", str(schedule.payload)),
        ("misfire", _misfire_text(schedule)),
        ("jitter", format_duration(timedelta(seconds=schedule.jitter))),
        ("state", "paused" if schedule.paused else "active"),
        ("origin", "declared in code" if schedule.origin == "code" else "added at run time"),
        ("handled up to", _when(schedule, schedule.tick_cursor)),
        ("fired", str(schedule.fired)),
        ("late", _late_text(schedule)),
        ("skipped", str(schedule.skipped)),
        ("coalesced", str(schedule.coalesced)),
        ("last fired", _when(schedule, schedule.last_fired) if schedule.last_fired else "never"),
    ]
    for label, value in rows:
        run.out.line(f"{label:>14}: {value}")
    _show_next(run, schedule)
    return EXIT_OK


def schedule_pause(run: Invocation) -> int:
    return _set_paused(run, paused=True)


def schedule_resume(run: Invocation) -> int:
    return _set_paused(run, paused=False)


def schedule_remove(run: Invocation) -> int:
    """Exit 1 when no schedule has the name: `--json` still prints `{"removed": false}`."""
    with open_app(run.dsn) as app:
        try:
            app.admin.remove_schedule(run.args.name)
        except ScheduleNotFound:
            if run.wants_json:
                run.out.json({"removed": False})
            raise
    if run.wants_json:
        run.out.json({"removed": True})
    else:
        run.out.line(f"removed schedule {run.args.name}; its pending jobs were cancelled")
    return EXIT_OK


def schedule_preview(run: Invocation) -> int:
    args = run.args
    cadence = parse_cadence(args.cadence, args.zone)
    start = args.start or datetime.now(UTC)
    ticks = preview(cadence, start, args.count)
    if run.wants_json:
        run.out.json([tick.isoformat() for tick in ticks])
    else:
        for tick in ticks:
            run.out.line(tick.isoformat())
    return EXIT_OK


def _set_paused(run: Invocation, *, paused: bool) -> int:
    with open_app(run.dsn) as app:
        if paused:
            schedule = app.admin.pause_schedule(run.args.name)
        else:
            schedule = app.admin.resume_schedule(run.args.name)
    if run.wants_json:
        run.out.json(schedule.to_json())
    else:
        state = "paused" if paused else "resumed"
        run.out.line(f"{state} schedule {schedule.name}")
    return EXIT_OK


def _upcoming(schedule: Schedule) -> list[datetime]:
    cadence = schedule.parsed_cadence()
    return preview(cadence, schedule.tick_cursor, SHOW_NEXT)


def _show_next(run: Invocation, schedule: Schedule) -> None:
    try:
        ticks = _upcoming(schedule)
    except InvalidSchedule as exc:
        run.out.note(f"cannot list its next ticks: {exc}")
        return
    run.out.line("next ticks:")
    for text in schedule_times(schedule, list(ticks)):
        run.out.line(f"  {text}")


def _misfire_text(s: Schedule) -> str:
    bound = f" {s.catch_up}" if s.catch_up is not None else ""
    return f"{s.misfire}{bound} after {s.describe_grace()}"


def _late_text(s: Schedule) -> str:
    if not s.late:
        return "0"
    mean = format_duration(timedelta(seconds=s.lateness_mean))
    worst = format_duration(timedelta(seconds=s.lateness_max))
    return f"{s.late} (mean {mean}, max {worst})"


def _next_text(s: Schedule, unfired_at: datetime | None = None) -> str:
    """Its next tick. With no scheduler running (`unfired_at`: the database clock then), the
    tick it waits for, marked overdue once it has passed."""
    if unfired_at is None:
        return _when(s, s.next_tick) if s.next_tick is not None and not s.paused else "-"
    fire = next_fire(s)
    if fire is None:
        return "-"
    return f"{_when(s, fire)} (overdue)" if fire <= unfired_at else _when(s, fire)


def _when(s: Schedule, moment: datetime | None) -> str:
    """One of the schedule's instants on its wall clock, to the second when it needs them."""
    return schedule_times(s, [moment])[0]


# -- queue ------------------------------------------------------------------------------------


def queue_list(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        queues = app.admin.list_queue_settings()
    if run.wants_json:
        run.out.json([_queue_json(queue) for queue in queues])
        return EXIT_OK
    table = Table(title="queues with settings", title_justify="left")
    for column in ("queue", "state", "rate", "burst", "concurrency", "key limits"):
        table.add_column(column)
    for queue in queues:
        table.add_row(
            queue.name,
            "paused" if queue.paused else "active",
            _rate_text(queue.rate),
            f"{queue.burst:g}" if queue.burst is not None else "-",
            str(queue.concurrency) if queue.concurrency is not None else "-",
            ", ".join(f"{k.pattern} {_rate_text(k.rate)}" for k in queue.key_limits) or "-",
        )
    run.out.show(table)
    return EXIT_OK


def queue_pause(run: Invocation) -> int:
    return _queue_paused(run, paused=True)


def queue_resume(run: Invocation) -> int:
    return _queue_paused(run, paused=False)


def queue_limit(run: Invocation) -> int:
    args = run.args
    with open_app(run.dsn) as app, _known_queue(run):
        queue = app.admin.limit_queue(
            args.queue,
            rate=args.rate,
            burst=args.burst,
            concurrency=args.concurrency,
            create=args.create,
        )
    return _print_queue(run, queue, "limits set" if queue.limited else "limits cleared")


def queue_limit_key(run: Invocation) -> int:
    args = run.args
    with open_app(run.dsn) as app, _known_queue(run):
        queue = app.admin.limit_key(
            args.queue, args.pattern, rate=args.rate, burst=args.burst, create=args.create
        )
    return _print_queue(run, queue, f"each key matching {args.pattern} limited")


def queue_unlimit_key(run: Invocation) -> int:
    args = run.args
    with open_app(run.dsn) as app:
        queue = app.admin.unlimit_key(args.queue, args.pattern)
    return _print_queue(run, queue, f"key limit {args.pattern} removed")


def queue_remove(run: Invocation) -> int:
    """Exit 0 when the queue has no settings left, 1 when it has pending or running jobs."""
    with open_app(run.dsn) as app, _known_queue(run):
        removal = app.admin.remove_queue(run.args.queue)
    if run.wants_json:
        run.out.json({"name": removal.name, "removed": removal.removed})
    else:
        what = "settings removed" if removal.removed else "had no stored settings"
        run.out.line(f"queue {removal.name}: {what}")
    return EXIT_OK


def _queue_paused(run: Invocation, *, paused: bool) -> int:
    with open_app(run.dsn) as app, _known_queue(run):
        if paused:
            queue = app.admin.pause_queue(run.args.queue, create=run.args.create)
        else:
            queue = app.admin.resume_queue(run.args.queue)
    return _print_queue(run, queue, "paused" if paused else "resumed")


@contextmanager
def _known_queue(run: Invocation) -> Iterator[None]:
    """A queue nobody knows is a usage error, with the way to make it on purpose when the
    command has one."""
    try:
        yield
    except QueueNotFound as exc:
        hint = " (--create to make it on purpose)" if hasattr(run.args, "create") else ""
        raise UsageError(f"{exc}{hint}") from None


def _print_queue(run: Invocation, queue: QueueSettings, what: str) -> int:
    if run.wants_json:
        run.out.json(_queue_json(queue))
    else:
        run.out.line(f"queue {queue.name}: {what}")
    return EXIT_OK


def _queue_json(queue: QueueSettings) -> dict[str, object]:
    return {
        "name": queue.name,
        "paused": queue.paused,
        "rate_per_second": queue.rate,
        "burst": queue.burst,
        "concurrency": queue.concurrency,
        "key_limits": [
            {"pattern": k.pattern, "rate_per_second": k.rate, "burst": k.burst}
            for k in queue.key_limits
        ],
    }


def _rate_text(rate: float | None) -> str:
    return f"{rate:g}/s" if rate is not None else "-"


# -- scheduler --------------------------------------------------------------------------------


def scheduler(run: Invocation) -> int:
    args = run.args
    app = open_app(run.dsn, args.app)
    defaults = SchedulerOptions()
    options = SchedulerOptions(
        lookahead=args.lookahead if args.lookahead is not None else defaults.lookahead,
        retention=args.retention if args.retention is not None else defaults.retention,
    )
    ensure_metrics(app, args.metrics_port)  # before the Scheduler, which counts on the app's
    service = Scheduler(app, options)
    configure_logging(args.log_level, run.out.stderr, args.log_format)
    # One clear line when the database is unreachable or not migrated, before the loop.
    app.store.schedule_due(options.lookahead)
    metrics = None
    try:
        metrics = serve_metrics(app, args.metrics_port, args.metrics_host, watch_store=True)
        service.run()
    finally:
        if metrics is not None:
            metrics.close()  # first: a scrape would open the store again
        app.close()
    return EXIT_OK
