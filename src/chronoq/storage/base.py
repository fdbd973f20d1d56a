"""The store port: what the worker, the app and the CLI need from a database.

Every adapter (SQLite, PostgreSQL) implements `JobStore` and passes the one contract suite in
`tests/contract/`. Each method takes one params dataclass (Noun+Verb names) so options can grow
without changing signatures. Every write a worker makes is fenced by the job's lease token: a write
whose token is stale matches no row, and the method reports it by leaving the id out of its result.

Time: every decision (is a job due, when does a lease end, when does a retry run) is made on the
database clock. `now` fields exist so tests can pin that clock; leave them `None` in production.

`JobStore` is composed of one port per table, as the SQL is split (`chronoq.storage.port`),
and leadership, which is here. Every name of those modules is importable from here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

# LeaderTerm is chronoq.coordination's; re-exported where it was.
from chronoq.coordination.base import LeaderTerm as LeaderTerm
from chronoq.coordination.base import PartitionElector
from chronoq.storage.port.jobadmin import (
    LATENESS_BOUNDS,
    DeadPurgeParams,
    DeadRequeueParams,
    DeadRequeueResult,
    FinishedBucket,
    JobAdminPort,
    JobListParams,
    JobPruneParams,
    Overview,
    OverviewParams,
    QueueCounts,
)
from chronoq.storage.port.jobs import (
    JobClaimParams,
    JobFinishParams,
    JobHandOffParams,
    JobHeartbeatResult,
    JobInsertParams,
    JobInsertResult,
    JobLeaseRef,
    JobRescueParams,
    JobsPort,
)
from chronoq.storage.port.processes import (
    ProcessBeatParams,
    ProcessesPort,
    ProcessListParams,
    ProcessSessionsEndParams,
)
from chronoq.storage.port.queues import QueueLimitParams, QueueRemoval, QueueSettings, QueuesPort
from chronoq.storage.port.schedules import (
    ScheduleAdvance,
    ScheduleDecision,
    ScheduleDue,
    SchedulesPort,
    ScheduleUpsertParams,
)
from chronoq.storage.port.session import ChangeListener, MigrationChange, SessionPort
from chronoq.storage.port.tier import (
    IdClaim,
    JobClaimIdsParams,
    JobStageParams,
    StageRow,
    Staging,
    TierPort,
)

__all__ = [
    "LATENESS_BOUNDS",
    "ChangeListener",
    "DeadPurgeParams",
    "DeadRequeueParams",
    "DeadRequeueResult",
    "FinishedBucket",
    "IdClaim",
    "JobAdminPort",
    "JobClaimIdsParams",
    "JobClaimParams",
    "JobFinishParams",
    "JobHandOffParams",
    "JobHeartbeatResult",
    "JobInsertParams",
    "JobInsertResult",
    "JobLeaseRef",
    "JobListParams",
    "JobPruneParams",
    "JobRescueParams",
    "JobStageParams",
    "JobStore",
    "JobsPort",
    "LeaderTerm",
    "MigrationChange",
    "Overview",
    "OverviewParams",
    "ProcessBeatParams",
    "ProcessListParams",
    "ProcessSessionsEndParams",
    "ProcessesPort",
    "QueueCounts",
    "QueueLimitParams",
    "QueueRemoval",
    "QueueSettings",
    "QueuesPort",
    "ScheduleAdvance",
    "ScheduleDecision",
    "ScheduleDue",
    "ScheduleUpsertParams",
    "SchedulesPort",
    "SessionPort",
    "StageRow",
    "Staging",
    "TierPort",
]


if TYPE_CHECKING:
    from chronoq.coordination.legacy import LeaderElector


class JobStore(
    SessionPort,
    JobsPort,
    JobAdminPort,
    QueuesPort,
    SchedulesPort,
    ProcessesPort,
    TierPort,
    Protocol,
):
    """The storage port. Adapters: `SqliteStore`, `PostgresStore`."""

    # -- leadership -----------------------------------------------------------------------

    def elector(self, duty: str, holder: str, ttl: float, partitions: int = 1) -> PartitionElector:
        """An elector of `duty` among this store's processes (see chronoq.coordination)."""
        ...

    def leader_elector(self, duty: str, holder: str, ttl: float) -> LeaderElector:
        """Deprecated: `elector(duty, holder, ttl)`; its attempt()/resign() warn too."""
        ...

    def leader_get(self, duty: str) -> LeaderTerm | None: ...


def __getattr__(name: str) -> object:
    # The old elector shape is deprecated, and still importable from here.
    if name == "LeaderElector":
        import warnings

        from chronoq.coordination import legacy

        warnings.warn(
            "chronoq.storage.base.LeaderElector is deprecated: electors implement"
            " chronoq.coordination.PartitionElector",
            DeprecationWarning,
            stacklevel=2,
        )
        return legacy.LeaderElector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
