"""`chronoq tier status`: the partitions of tiered dispatch, their leaders and their streams."""

from __future__ import annotations

from rich.table import Table

from chronoq.cli.apps import open_app
from chronoq.cli.invocation import EXIT_FAILURE, EXIT_OK, Invocation
from chronoq.tier.status import TierView, read_tier


def tier_status(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        view = read_tier(app.runtime())
    if run.wants_json:
        run.out.json(view.as_json())
    elif view.dispatch != "tiered":
        run.out.note(
            f"dispatch is {view.dispatch!r}: workers claim from the database; there is no tier "
            "(set CHRONOQ_DISPATCH=tiered, see docs/tier.md)"
        )
    else:
        run.out.show(tier_table(view))
    for problem in view.problems:
        run.out.error(problem)
    return EXIT_FAILURE if view.problems else EXIT_OK


def tier_table(view: TierView) -> Table:
    led = sum(1 for p in view.partitions if p.leader is not None)
    title = (
        f"{len(view.partitions)} partitions, {led} led, "
        f"{len(view.schedulers)} scheduler(s): {', '.join(view.schedulers) or 'none'}"
    )
    table = Table(title=title, title_justify="left")
    for column in ("partition", "leader", "epoch", "staged", "due", "stream", "lag"):
        table.add_column(column, justify="left" if column == "leader" else "right")
    for p in view.partitions:
        table.add_row(
            str(p.partition),
            p.leader or "[red]none[/red]",
            "" if p.epoch is None else str(p.epoch),
            str(p.staged),
            str(p.due),
            str(p.stream_length),
            str(p.stream_lag),
        )
    return table
