"""Log lines as an observer: one line per lifecycle event, with structured fields.

Every line about a job carries `job_id`, `task`, `queue` and `attempt` (the JSON format puts
them in fields); batch lines carry `job_ids`. The loggers are `chronoq.worker` and
`chronoq.scheduler`, as before the events existed, so logging configuration keeps working, and
`chronoq.admin` for what operators change through the admin API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from chronoq.core.jobs import Job, Outcome
from chronoq.observability.events import (
    Administered,
    AttemptAbandoned,
    AttemptCancelled,
    AttemptEnd,
    AttemptsEnded,
    AttemptStuck,
    JobsHandedOff,
    JobsPruned,
    JobsReleased,
    LeaderChanged,
    LeaseLost,
    LeasesRescued,
    Subscription,
    TicksFired,
    WorkerStarted,
    WorkerStopped,
)

worker_log = logging.getLogger("chronoq.worker")
scheduler_log = logging.getLogger("chronoq.scheduler")
admin_log = logging.getLogger("chronoq.admin")
SCHEDULER = "scheduler"


class EventLog:
    """Writes the lines; subscribe one per worker or scheduler."""

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(WorkerStarted, self.worker_started),
            Subscription(WorkerStopped, self.worker_stopped),
            Subscription(AttemptsEnded, self.attempts_ended),
            Subscription(LeaseLost, self.lease_lost),
            Subscription(AttemptCancelled, self.attempt_cancelled),
            Subscription(JobsReleased, self.jobs_released),
            Subscription(JobsHandedOff, self.jobs_handed_off),
            Subscription(LeasesRescued, self.leases_rescued),
            Subscription(AttemptStuck, self.attempt_stuck),
            Subscription(AttemptAbandoned, self.attempt_abandoned),
            Subscription(LeaderChanged, self.leader_changed),
            Subscription(TicksFired, self.ticks_fired),
            Subscription(JobsPruned, self.jobs_pruned),
            Subscription(Administered, self.administered),
        )

    # -- the worker -----------------------------------------------------------------------

    def worker_started(self, event: WorkerStarted) -> None:
        worker_log.info(
            "worker %s serving %s (concurrency %d)",
            event.worker_id,
            ",".join(event.queues),
            event.concurrency,
            extra={"action": "worker.start", "worker": event.worker_id},
        )

    def worker_stopped(self, event: WorkerStopped) -> None:
        worker_log.info(
            "worker %s stopped: %s",
            event.worker_id,
            event.summary,
            extra={"action": "worker.stop", "worker": event.worker_id},
        )

    def attempts_ended(self, event: AttemptsEnded) -> None:
        # Most attempts end done, logged at INFO: when that is off, pass them over at once.
        done_shown = worker_log.isEnabledFor(logging.INFO)
        for end in event.ends:
            if end.accepted:
                if done_shown or end.outcome != Outcome.DONE:
                    _log_attempt(end, event.worker_id)
            else:
                worker_log.warning(
                    "job %d: result %s discarded, lease token %d is stale (the job was rescued "
                    "and claimed again)",
                    end.job.id,
                    end.outcome,
                    end.job.lease_token,
                    extra=job_extra(end.job, "job.lost", event.worker_id),
                )

    def lease_lost(self, event: LeaseLost) -> None:
        worker_log.warning(
            "job %d: heartbeat rejected, the lease was lost; its result will be discarded",
            event.job.id,
            extra=job_extra(event.job, "job.lease_lost", event.worker_id),
        )

    def attempt_cancelled(self, event: AttemptCancelled) -> None:
        if event.interrupted:
            how = "its handler was interrupted"
        elif event.started:
            how = "its handler is told (ctx.cancelled) and its result will be discarded"
        else:
            how = "it had not started, and will not"
        worker_log.info(
            "job %d %s was cancelled while running; %s",
            event.job.id,
            event.job.task,
            how,
            extra=job_extra(event.job, "job.cancelled_running", event.worker_id),
        )

    def jobs_released(self, event: JobsReleased) -> None:
        worker_log.info(
            "released %d claimed job(s) that had not started",
            len(event.released),
            extra={
                "action": "worker.release",
                "worker": event.worker_id,
                "job_ids": sorted(event.released),
            },
        )

    def jobs_handed_off(self, event: JobsHandedOff) -> None:
        tasks = sorted({job.task for job in event.jobs if job.id in event.handed_off})
        if not tasks:
            return
        worker_log.info(
            "gave back %d job(s) of task(s) %s, which this worker does not know and a live "
            "worker does; they are due again in %.0fs, no attempt used",
            len(event.handed_off),
            ", ".join(tasks),
            event.delay,
            extra={
                "action": "worker.hand_off",
                "worker": event.worker_id,
                "job_ids": sorted(event.handed_off),
            },
        )

    def leases_rescued(self, event: LeasesRescued) -> None:
        by_scheduler = event.by == SCHEDULER
        logger = scheduler_log if by_scheduler else worker_log
        extra: dict[str, Any] = {
            "action": "scheduler.rescue" if by_scheduler else "worker.rescue",
            "requeued": list(event.requeued),
            "dead": list(event.dead),
        }
        if not by_scheduler:
            extra["worker"] = event.by
        logger.warning(
            "rescued %d job(s) whose lease expired: requeued %s, dead %s",
            len(event.requeued) + len(event.dead),
            list(event.requeued),
            list(event.dead),
            extra=extra,
        )

    def attempt_stuck(self, event: AttemptStuck) -> None:
        worker_log.error(
            "job %d %s ran past its %.3gs timeout in a thread that cannot be stopped; "
            "finishing the other jobs, then exiting for a fresh process",
            event.job.id,
            event.job.task,
            event.timeout,
            extra=job_extra(event.job, "worker.retire", event.worker_id),
        )

    def attempt_abandoned(self, event: AttemptAbandoned) -> None:
        worker_log.warning(
            "job %d: its handler is still running in a thread at shutdown; its lease is left "
            "to expire",
            event.job.id,
            extra=job_extra(event.job, "worker.abandon", event.worker_id),
        )

    # -- the scheduler --------------------------------------------------------------------

    def leader_changed(self, event: LeaderChanged) -> None:
        if event.term is not None:
            scheduler_log.info(
                "scheduler %s leads (term %d)",
                event.holder,
                event.term.term,
                extra={
                    "action": "scheduler.elected",
                    "holder": event.holder,
                    "term": event.term.term,
                },
            )
            return
        scheduler_log.log(
            logging.INFO if event.graceful else logging.WARNING,
            "scheduler %s no longer leads: %s",
            event.holder,
            event.why,
            extra={"action": "scheduler.deposed", "holder": event.holder},
        )

    def ticks_fired(self, event: TicksFired) -> None:
        advance = event.advance
        if not (advance.jobs or advance.skipped or advance.coalesced):
            return
        scheduler_log.log(
            logging.WARNING if (advance.late or advance.skipped) else logging.INFO,
            "schedule %s: fired %d tick(s) (%d already fired elsewhere), %d late, "
            "%d skipped, %d coalesced",
            event.schedule,
            advance.inserted,
            len(advance.jobs) - advance.inserted,
            advance.late,
            advance.skipped,
            advance.coalesced,
            extra={"action": "scheduler.cron", "schedule": event.schedule},
        )

    def jobs_pruned(self, event: JobsPruned) -> None:
        scheduler_log.info(
            "pruned %d finished job(s) older than %s",
            event.count,
            event.retention,
            extra={"action": "scheduler.prune"},
        )

    # -- the admin API --------------------------------------------------------------------

    def administered(self, event: Administered) -> None:
        admin_log.info(
            "%s %s: %s",
            event.action,
            event.target,
            event.result,
            extra={"action": f"admin.{event.action}", "target": event.target},
        )


def _log_attempt(end: AttemptEnd, worker_id: str) -> None:
    """One line per attempt: what happened, how long the attempt took, what comes next."""
    outcome, job = end.outcome, end.job
    level = logging.INFO if outcome == Outcome.DONE else logging.WARNING
    if outcome == Outcome.DEAD:
        level = logging.ERROR
    if not worker_log.isEnabledFor(level):
        return
    head = f"job {job.id} {job.task} attempt {job.attempts}/{job.max_attempts}"
    error = end.error
    cause = f": {error['error']}: {error['message']}" if error else ""
    took = f"{end.duration:.3f}s"
    if outcome == Outcome.DONE:
        message = f"{head} done in {took}"
    elif outcome == Outcome.RETRY:
        message = f"{head} failed after {took}, retrying in {end.retry_delay:.3f}s{cause}"
    elif outcome == Outcome.DEAD:
        message = f"{head} failed after {took}, now dead{cause}"
    else:
        message = f"{head} cancelled after {took}{cause}"
    worker_log.log(level, message, extra=job_extra(job, f"job.{outcome}", worker_id))


def job_extra(job: Job, action: str, worker_id: str) -> dict[str, Any]:
    return {
        "action": action,
        "job_id": job.id,
        "task": job.task,
        "queue": job.queue,
        "attempt": job.attempts,
        "worker": worker_id,
    }


def batch_extra(action: str, worker_id: str, jobs: Sequence[Job]) -> dict[str, Any]:
    return {"action": action, "worker": worker_id, "job_ids": [job.id for job in jobs]}
