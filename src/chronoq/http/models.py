"""The API's request and response bodies, which its OpenAPI document describes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from chronoq.core.jobs import MAX_ID, JobStatus

MAX_BATCH = 10_000

JobId = Annotated[int, Field(ge=1, le=MAX_ID)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Strict(BaseModel):
    """Unknown fields are refused by name rather than ignored: a typo must not go unseen."""

    model_config = ConfigDict(extra="forbid")


class JobIn(Strict):
    """One job to enqueue. Give `run_at` or `delay`, not both; neither means now."""

    task: str = Field(description="The task's name.")
    payload: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments.")
    run_at: AwareDatetime | None = Field(default=None, description="When to run, with an offset.")
    delay: Seconds | str | None = Field(
        default=None, description='Seconds, or a duration such as "4h" or "1h30m".'
    )
    queue: str | None = None
    key: str | None = Field(
        default=None, description="Unique among live jobs: enqueuing it again returns that job."
    )
    priority: int | None = None
    max_attempts: int | None = None
    misfire: Literal["run_late", "skip"] | None = None
    misfire_grace: Seconds | str | None = None
    rate_key: str | None = None
    unique_for: Seconds | str | None = Field(
        default=None,
        description='With `key`: seconds, or a duration such as "1h". Enqueuing the key within '
        "this period of the first job's enqueue returns that job, even after it finished.",
    )


class BatchIn(Strict):
    jobs: list[JobIn] = Field(min_length=1, max_length=MAX_BATCH)


class EnqueuedOut(BaseModel):
    id: int
    created: bool = Field(
        description="False when a live job already held the key, or (unique_for) a job took it "
        "within the period."
    )


class BatchOut(BaseModel):
    results: list[EnqueuedOut]


class AttemptError(BaseModel):
    model_config = ConfigDict(extra="allow")

    attempt: int | None = None
    error: str | None = None
    message: str | None = None
    traceback: str | None = None
    worker: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


class JobOut(BaseModel):
    id: int
    queue: str
    task: str
    payload: Any
    status: JobStatus
    priority: int
    run_at: str
    attempts: int
    max_attempts: int | None
    lease_seconds: float
    lease_token: int
    locked_until: str | None
    worker_id: str | None
    key: str | None
    errors: list[AttemptError]
    created_at: str
    started_at: str | None
    finished_at: str | None
    misfire: str
    misfire_grace: float | None
    rate_key: str | None
    schedule: str | None
    tick: str | None
    ticks: int
    fence_rejections: int
    output: Any = Field(
        description="What the handler returned (JSON), stored when the job completed; null "
        "until then, or when it returned nothing."
    )
    progress: float | None = Field(
        description="How far the attempt has come, 0 to 1, as its last heartbeat carried it."
    )
    progress_note: str | None = Field(description="The note reported with the progress.")


class JobPage(BaseModel):
    jobs: list[JobOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class DeadSelection(Strict):
    """Which dead jobs: the `ids` given, or with `all` every dead job; `queue` and `task`
    narrow either. One of `ids` and `all` is required, so an empty body touches nothing."""

    ids: list[JobId] | None = Field(default=None, max_length=MAX_BATCH)
    all: bool = False
    queue: str | None = None
    task: str | None = None


class PurgeIn(DeadSelection):
    older_than: Seconds | str = Field(
        default=0, description='Only jobs dead for at least this long: seconds, or "7d".'
    )


class RequeueOut(BaseModel):
    requeued: list[int]
    key_conflicts: list[int] = Field(
        description="Dead jobs left dead because a live job holds their key."
    )
    not_dead: list[int] = Field(
        description="Ids given of jobs that are not dead (or not of the `queue` or `task`)."
    )
    not_found: list[int] = Field(description="Ids given that no job has.")


class QueueChangeIn(Strict):
    """`create: true` stores settings for a queue no task, job or setting uses yet; without
    it such a name is refused as unknown (a typo would otherwise make a queue)."""

    create: bool = False


class QueueRemovedOut(BaseModel):
    name: str
    removed: bool = Field(description="False when the queue had no stored settings.")


class PurgeOut(BaseModel):
    purged: int


class ScheduleOut(BaseModel):
    name: str
    cadence: str
    zone: str
    task: str
    payload: Any
    queue: str
    priority: int
    misfire: str
    misfire_grace: float
    catch_up: int | None
    jitter: float
    paused: bool
    origin: str
    tick_cursor: str
    next_tick: str | None
    fired: int
    late: int
    skipped: int
    coalesced: int
    lateness_mean_seconds: float
    lateness_max_seconds: float
    last_fired: str | None


class KeyLimitOut(BaseModel):
    pattern: str
    rate: float
    burst: float


class QueueOut(BaseModel):
    name: str
    paused: bool
    rate: float | None
    burst: float | None
    concurrency: int | None
    key_limits: list[KeyLimitOut]
    pending: int
    due: int
    running: int
    dead: int
    oldest_due_age: float


class StatusCountsOut(BaseModel):
    """Jobs in each status (every status is present, 0 when no job has it), and their total."""

    pending: int
    running: int
    done: int
    dead: int
    cancelled: int
    skipped: int
    total: int


class StatsOut(BaseModel):
    """The document `chronoq stats --json` prints: counts per queue with jobs, and in total."""

    queues: dict[str, StatusCountsOut]
    totals: StatusCountsOut


class ErrorBody(BaseModel):
    type: str = Field(description="The error's kind, e.g. UnknownTask or ValidationError.")
    message: str
    field: str | None = Field(description="The input at fault, when one is.")


class ErrorOut(BaseModel):
    error: ErrorBody


class TaskParamOut(BaseModel):
    name: str
    kind: str = Field(description="positional_or_keyword, keyword_only, var_keyword, ...")
    required: bool


class TaskOut(BaseModel):
    """A task as the process knows it: what its jobs get when a producer leaves it out."""

    name: str
    queue: str
    priority: int
    max_attempts: int
    lease: float
    timeout: float | None
    misfire: str
    misfire_grace: float | None
    params: list[TaskParamOut]


class ProcessOut(BaseModel):
    id: str
    kind: str = Field(description="worker, scheduler or server.")
    state: str = Field(description="alive, stopped (it said so) or gone (it stopped refreshing).")
    host: str
    pid: int
    version: str
    queues: list[str]
    concurrency: int | None
    running: int = Field(description="Jobs its handlers run now.")
    duties: list[str] = Field(description='Leader duties it holds now: "scheduler", "partition:N".')
    tasks: list[TaskOut]
    started_at: str
    seen_at: str
    expires_at: str
    stopped_at: str | None
    seen_ago_seconds: float = Field(description="Since its last refresh, on the database clock.")


class ProcessesOut(BaseModel):
    """The document `chronoq processes --json` prints."""

    db_now: str
    processes: list[ProcessOut]
