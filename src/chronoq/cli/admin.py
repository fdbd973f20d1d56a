"""Commands that inspect and administer the store: migrate, jobs, dead, stats, enqueue.

Each administering command parses its arguments, calls the admin API (`app.admin`) and prints
what it answered; its errors become one line and an exit code in `chronoq.cli.main`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

from chronoq.cli.apps import command_config, open_app
from chronoq.cli.invocation import EXIT_FAILURE, EXIT_OK, Invocation
from chronoq.cli.output import dead_table, job_detail, jobs_table, stats_table
from chronoq.cli.parser import UsageError
from chronoq.core.jobs import Job, stats_json
from chronoq.errors import JobFinished
from chronoq.storage import open_store
from chronoq.storage.base import (
    DeadPurgeParams,
    DeadRequeueParams,
    DeadRequeueResult,
    JobListParams,
)
from chronoq.storage.dsn import redact


def migrate(run: Invocation) -> int:
    # Open without SQLite's migrate-on-open, so this command reports what it applied.
    config = command_config(run.dsn)
    store = open_store(config, migrate_sqlite=False)
    partitions: int | None = None
    try:
        change = store.migrate_to(run.args.to)
        where = redact(store.dsn_display)
        if config.dispatch == "tiered" and run.args.to is None:
            # Tiered dispatch fixes its partition count with the schema (docs/tier.md).
            partitions = store.tier_partitions(config.partitions)
    finally:
        store.close()
    if partitions is not None:
        run.out.note(f"tiered dispatch: {partitions} partitions")
    if run.wants_json:
        shown: dict[str, list[str]] = {"applied": change.applied}
        if run.args.to is not None:
            shown["reverted"] = change.reverted
        run.out.json(shown)
    elif change.applied or change.reverted:
        for name in change.applied:
            run.out.line(f"applied {name}")
        for name in change.reverted:
            run.out.line(f"reverted {name}")
        run.out.note(_migration_summary(where, change.applied, change.reverted))
    else:
        run.out.line(f"up to date ({where})")
    return EXIT_OK


def _migration_summary(where: str, applied: list[str], reverted: list[str]) -> str:
    done = [f"{len(applied)} migration(s) applied"] if applied else []
    done += [f"{len(reverted)} migration(s) reverted"] if reverted else []
    return f"{where}: {', '.join(done)}"


def enqueue(run: Invocation) -> int:
    args = run.args
    with open_app(run.dsn, args.app) as app:
        result = app.enqueue(
            args.task,
            args.payload,
            run_at=args.run_at,
            delay=args.delay,
            queue=args.queue,
            key=args.key,
            priority=args.priority,
            max_attempts=args.max_attempts,
            misfire=args.misfire,
            misfire_grace=args.misfire_grace,
            rate_key=args.rate_key,
            unique_for=args.unique_for,
        )
    if run.wants_json:
        run.out.json({"id": result.id, "created": result.created})
    else:
        run.out.line(str(result.id))
    if not result.created and args.unique_for is not None:
        run.out.note(
            f"key {args.key!r} was taken by job {result.id} within the last {args.unique_for}; "
            "nothing new was enqueued"
        )
    elif not result.created:
        run.out.note(f"key {args.key!r} is held by live job {result.id}; nothing new was enqueued")
    return EXIT_OK


# -- jobs ---------------------------------------------------------------------------------


def jobs_list(run: Invocation) -> int:
    args = run.args
    params = JobListParams(
        statuses=tuple(args.status or ()), queue=args.queue, task=args.task, limit=args.limit
    )
    with open_app(run.dsn) as app:
        jobs = app.admin.list_jobs(params)
    _print_jobs(run, jobs)
    return EXIT_OK


def jobs_show(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        job = app.admin.get_job(run.args.id)
    if run.wants_json:
        run.out.json(job.to_json())
    else:
        run.out.show(job_detail(job))
    return EXIT_OK


def jobs_cancel(run: Invocation) -> int:
    """Exit 1 when the job has already ended (cancelled included): `--json` still prints it."""
    with open_app(run.dsn) as app:
        try:
            job = app.admin.cancel_job(run.args.id)
        except JobFinished as exc:
            if run.wants_json:
                run.out.json(exc.job.to_json())
            raise
    if run.wants_json:
        run.out.json(job.to_json())
    else:
        run.out.line(f"cancelled job {job.id}")
    return EXIT_OK


def _print_jobs(run: Invocation, jobs: Sequence[Job]) -> None:
    if run.wants_json:
        run.out.json([job.to_json() for job in jobs])
    else:
        run.out.show(jobs_table(jobs))


# -- dead jobs ----------------------------------------------------------------------------


def dead_list(run: Invocation) -> int:
    params = JobListParams(queue=run.args.queue, limit=run.args.limit)
    with open_app(run.dsn) as app:
        jobs = app.admin.list_dead(params)
    if run.wants_json:
        run.out.json([job.to_json() for job in jobs])
    else:
        run.out.show(dead_table(jobs))
    return EXIT_OK


def dead_requeue(run: Invocation) -> int:
    """Exit 0 when every selected job was requeued (`--all` with nothing dead included), 1 when
    some stayed dead, were not dead or do not exist."""
    args = run.args
    if bool(args.ids) == bool(args.all):
        raise UsageError("give the ids of dead jobs to requeue, or --all (not both)")
    wanted: list[int] | None = None if args.all else sorted(set(args.ids))
    with open_app(run.dsn) as app:
        result = app.admin.requeue_dead(DeadRequeueParams(ids=wanted, queue=args.queue))
    if run.wants_json:
        run.out.json(dataclasses.asdict(result))
    else:
        _report_requeue(run, result)
    left = result.key_conflicts or result.not_dead or result.not_found
    return EXIT_FAILURE if left else EXIT_OK


def _report_requeue(run: Invocation, result: DeadRequeueResult) -> None:
    run.out.line(f"requeued {len(result.requeued)} job(s){_ids(result.requeued)}")
    if result.key_conflicts:
        conflicts = result.key_conflicts
        run.out.line(
            f"kept dead {len(conflicts)} job(s) whose key a live job holds{_ids(conflicts)}"
        )
    if result.not_dead:
        of_queue = " of that queue" if run.args.queue else ""
        run.out.line(f"not dead jobs{of_queue}{_ids(result.not_dead)}")
    if result.not_found:
        run.out.line(f"no job with id{_ids(result.not_found)}")


def _ids(ids: list[int]) -> str:
    return ": " + ", ".join(map(str, ids)) if ids else ""


def dead_purge(run: Invocation) -> int:
    """Deleting is for good, so the purge of every dead job is asked for by name (`--all`)."""
    args = run.args
    filtered = args.older_than is not None or args.queue is not None
    if args.ids and args.all:
        raise UsageError("give the ids of dead jobs to purge, or --all (not both)")
    if not (args.ids or args.all or filtered):
        raise UsageError(
            "choose the dead jobs to purge: their ids, --older-than or --queue; "
            "or --all to delete every dead job"
        )
    params = DeadPurgeParams(
        older_than=args.older_than or timedelta(0),
        queue=args.queue,
        ids=sorted(set(args.ids)) or None,
    )
    with open_app(run.dsn) as app:
        purged = app.admin.purge_dead(params)
    if run.wants_json:
        run.out.json({"purged": purged})
    else:
        run.out.line(f"purged {purged} dead job(s)")
    return EXIT_OK


# -- stats --------------------------------------------------------------------------------


def stats(run: Invocation) -> int:
    with open_app(run.dsn) as app:
        counts = app.admin.stats()
    if run.wants_json:
        run.out.json(stats_json(counts))
    else:
        run.out.show(stats_table(counts))
    return EXIT_OK
