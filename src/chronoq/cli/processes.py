"""`chronoq processes`: the fleet registry's live processes (with `--all`, recent ones too)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from chronoq.cli.apps import open_app
from chronoq.cli.invocation import EXIT_OK, Invocation
from chronoq.cli.output import short_time
from chronoq.fleet.view import ProcessView, fleet_json, ordered

STATE_STYLES = {"alive": "green", "stopped": "bright_black", "gone": "red"}
NOBODY = (
    "no live process: workers, schedulers and `chronoq serve` record themselves here when they "
    "start (--all lists those of the last day)"
)


def processes(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        fleet = app.admin.list_processes(every=run.args.all)
    if run.wants_json:
        run.out.json(fleet_json(fleet))
        return EXIT_OK
    views = ordered(fleet)
    run.out.show(processes_table(views, with_state=run.args.all))
    if not fleet.alive:
        run.out.note(NOBODY)
    return EXIT_OK


def processes_table(views: Sequence[ProcessView], *, with_state: bool) -> Table:
    alive = sum(1 for view in views if view.alive)
    title = (
        f"{len(views)} process(es), {alive} alive" if with_state else f"{alive} live process(es)"
    )
    table = Table(title=title, title_justify="left")
    columns = ["kind", "id", "host/pid", "version", "queues", "running/slots", "tasks", "duties"]
    for column in [*(["state"] if with_state else []), *columns]:
        table.add_column(column, justify="right" if column == "tasks" else "left")
    table.add_column("started (UTC)")
    table.add_column("last seen")
    for view in views:
        state = [Text(view.state, style=STATE_STYLES.get(view.state, ""))] if with_state else []
        table.add_row(
            *state,
            view.kind,
            view.id,
            f"{view.host}/{view.pid}",
            view.version,
            ",".join(view.queues) or "-",
            view.load_text,
            str(len(view.tasks)),
            ",".join(view.duties) or "-",
            short_time(view.started_at),
            view.seen_ago_text,
        )
    return table
