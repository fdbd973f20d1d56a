"""What the dashboard's forms and queries ask for, read with `fields`: a search of jobs (of
any status, running or dead) as store parameters, and the dead jobs an action selects. Each
failure is a `FieldError`, which the page shows."""

from __future__ import annotations

from collections.abc import Sequence

from chronoq.core.jobs import JobStatus
from chronoq.http import fields
from chronoq.http.fields import FieldError, optional
from chronoq.storage.base import DeadPurgeParams, DeadRequeueParams, JobListParams

PAGE_SIZE = 50  # jobs a page lists; a search asks for one more, to know if a next page exists


def job_search(form: dict[str, str], before_id: str) -> JobListParams:
    status = fields.status("status", form["status"])
    return JobListParams(
        statuses=(status,) if status is not None else (),
        queue=fields.name_filter("queue", optional(form["queue"])),
        task=fields.name_filter("task", optional(form["task"])),
        key=fields.key_filter(optional(form["key"])),
        created_after=fields.form_instant("created after", form["created_after"]),
        created_before=fields.form_instant("created before", form["created_before"]),
        before_id=_cursor(before_id),
        limit=PAGE_SIZE + 1,
    )


def running_search(queue: str, before_id: str) -> JobListParams:
    return JobListParams(
        statuses=(JobStatus.RUNNING,),
        queue=fields.name_filter("queue", optional(queue)),
        before_id=_cursor(before_id),
        limit=PAGE_SIZE + 1,
    )


def dead_search(queue: str, task: str, before_id: str) -> JobListParams:
    return JobListParams(
        statuses=(JobStatus.DEAD,),
        queue=fields.name_filter("queue", optional(queue)),
        task=fields.name_filter("task", optional(task)),
        before_id=_cursor(before_id),
        limit=PAGE_SIZE + 1,
    )


def _cursor(before_id: str) -> int | None:
    return fields.job_id("before_id", before_id) if before_id.strip() else None


def requeue_selection(
    ids: Sequence[str] | None, everything: str, queue: str, task: str
) -> DeadRequeueParams:
    """The checked jobs, or with `everything` every dead job of the filter."""
    queue_name = fields.name_filter("queue", optional(queue))
    task_name = fields.name_filter("task", optional(task))
    if everything:
        return DeadRequeueParams(ids=None, queue=queue_name, task=task_name)
    chosen = fields.job_ids("job id", ids or [])
    if not chosen:
        raise FieldError("ids", "Select at least one dead job first.")
    return DeadRequeueParams(ids=chosen, queue=queue_name, task=task_name)


def purge_selection(
    ids: Sequence[str] | None, older_than: str, queue: str, task: str
) -> DeadPurgeParams:
    """The checked jobs, or with `older_than` the filter's jobs that died that long ago."""
    queue_name = fields.name_filter("queue", optional(queue))
    task_name = fields.name_filter("task", optional(task))
    if older_than.strip():
        age = fields.duration("older than", older_than)
        return DeadPurgeParams(older_than=age, queue=queue_name, task=task_name)
    chosen = fields.job_ids("job id", ids or [])
    if not chosen:
        raise FieldError("ids", "Select at least one dead job, or give an age such as 7d.")
    return DeadPurgeParams(ids=chosen, queue=queue_name, task=task_name)
