"""The history checker: what a chaos run must not have done, read from the database (jobs,
their error histories, the effects table) and from the workers' JSONL histories.

Rules, each a list of violations (empty is a pass):

- **lost**: a job enqueued by the run that did not end as its policy says (the workload's jobs
  all end `done`: their attempts outnumber any fault; a poison job, whose handler kills its
  process, ends `dead` after exactly its max_attempts, each attempt's error naming the crash).
- **unexplained executions**: every execution of a job but its last accepted one must have an
  entry in the job's error history for its attempt: a lease expiry (crash, stop, cut-off), a
  planned failure, an error caused by an injected fault, or a shutdown.
- **stale writes accepted**: a done job has exactly one accepted completion, with its final
  fencing token; no (job, token) has two accepted results; once a result for a (job, token) was
  refused, no later result for it from the same process is accepted (a token never comes back);
  no heartbeat is accepted that was sent after a newer token of its job had been claimed. All
  processes append to one history file, so its order is the order of the writes: a claim
  logged before a heartbeat's "send" line was committed before that heartbeat ran.
- **overlaps**: two executions of one job may overlap only after the first's lease expired: the
  rescue that ended it must be recorded before the second started.
- **slow recoveries**: a job running on a worker that was SIGKILLed runs again within
  lease + rescue interval + 2 s of the kill, unless the database restarted or the workers'
  connections were cut within that long before or after it, or another worker was stopped
  around it, or (tiered runs) Redis restarted, etcd lost its quorum or a partition leader was
  killed or stopped (those recoveries are measured, not bounded).
- **tier rules** (tiered runs): tests.chaos.tiercheck.
- **ticks**: each cron tick fired exactly once, with no tick missing between the first and last,
  and ended done (but for those a pause of the schedule cancelled: not due yet, or waiting for
  a retry, when a tiered run paused it at its end).
- **retry delays**: a planned failure's retry falls due within `[0, min(cap, base * 2^n)]` of the
  failure (read from the run_at each execution was claimed with), and the delays, as fractions
  of their windows, are uniform (Kolmogorov-Smirnov against U(0, 1), at the run's alpha: each
  run of `make chaos` gets its share of a 0.01 family-wise level, and each scenario of the short
  pass of `make test` 0.0001, or a correct system would often fail one of the many runs).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tests.chaos.tiercheck import TierFindings
from tests.chaos.workload import BACKOFF, LEASE, POISON_ATTEMPTS

RESCUE_INTERVAL = 1.0
DATABASE_OUTAGES = ("restart_fast", "restart_immediate", "terminate_backends")
# In a tiered run a rescued job reaches a worker through a partition leader and Redis: these
# delay that as an outage does.
TIER_OUTAGES = (
    "restart_redis",
    "lose_etcd_quorum",
    "kill_partition_leader",
    "stop_partition_leader",
)
RECOVERY_SLACK = 2.0
DELAY_ROUNDING = 0.001  # seconds: a delay travels as a float and is stored in microseconds
MIN_KS_SAMPLES = 30
KS_ALPHA = 0.01
FAULT_CAUSED = ("OperationalError", "StoreUnavailable", "AdminShutdown", "InterfaceError")
POISON = -1  # the plan of a poison job, where others plan a number of failures
CRASH_ERRORS = frozenset({"WorkerCrashed", "LeaseExpired"})


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at: datetime  # database clock
    target: int | None = None  # pid


@dataclass(slots=True)
class Execution:
    job: int
    attempt: int
    token: int
    worker: str
    scheduled: datetime  # the job's run_at when this execution was claimed
    started: datetime
    ended: datetime | None


@dataclass(slots=True)
class Findings:
    jobs: int = 0
    executions: int = 0
    extra_explained: int = 0  # runs beyond the one that counted, each with its reason
    planned_failures: int = 0
    poison_dead: int = 0  # poison jobs that ended dead at exactly their max_attempts
    stale_refused: int = 0  # writes with a stale token that the store refused
    stale_heartbeats: int = 0  # heartbeats sent after a newer claim of their job (all refused)
    retries_measured: int = 0
    ks_statistic: float = 0.0
    recoveries: list[float] = field(default_factory=list)
    compound_recoveries: list[float] = field(default_factory=list)  # with a database outage
    lost: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    stale_accepted: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    slow_recoveries: list[str] = field(default_factory=list)
    ticks: list[str] = field(default_factory=list)
    retry_delays: list[str] = field(default_factory=list)
    tier: TierFindings | None = None  # tiered runs only

    @property
    def violations(self) -> list[str]:
        return [
            *(self.tier.violations if self.tier is not None else []),
            *self.lost,
            *self.unexplained,
            *self.stale_accepted,
            *self.overlaps,
            *self.slow_recoveries,
            *self.ticks,
            *self.retry_delays,
        ]


def check(
    dsn: str,
    histories: Iterable[Path],
    faults: Sequence[Fault],
    enqueued: dict[int, int],
    ks_alpha: float = KS_ALPHA,
    paused_ticks: frozenset[int] = frozenset(),
) -> Findings:
    """`enqueued` maps job ids to the number of failures each plans (POISON: a poison job);
    `paused_ticks` are tick jobs a pause of the schedule cancelled (not due, or waiting for
    a retry), which need not end done."""
    jobs, executions = _load(dsn)
    events = read_histories(histories)
    found = Findings(jobs=len(enqueued), executions=sum(len(e) for e in executions.values()))
    _check_lost(found, jobs, enqueued)
    _check_executions(found, jobs, executions)
    _check_writes(found, jobs, events)
    _check_recoveries(found, executions, faults)
    _check_ticks(found, jobs, paused_ticks)
    _check_retry_delays(found, jobs, executions, enqueued, ks_alpha)
    return found


def _load(dsn: str) -> tuple[dict[int, dict[str, Any]], dict[int, list[Execution]]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        jobs = {
            row["id"]: row
            for row in conn.execute(
                "SELECT id, task, status, attempts, lease_token, errors, schedule, tick "
                "FROM chronoq_jobs"
            )
        }
        executions: dict[int, list[Execution]] = defaultdict(list)
        for row in conn.execute(
            "SELECT job_id, attempt, token, worker, scheduled_at, started_at, ended_at "
            "FROM chaos_effects "
            "ORDER BY job_id, token"
        ):
            executions[row["job_id"]].append(
                Execution(
                    row["job_id"],
                    row["attempt"],
                    row["token"],
                    row["worker"],
                    row["scheduled_at"],
                    row["started_at"],
                    row["ended_at"],
                )
            )
    return jobs, executions


def read_histories(paths: Iterable[Path]) -> list[dict[str, Any]]:
    events = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by SIGKILL: the event was not completed
    return events


def _check_lost(found: Findings, jobs: dict[int, dict[str, Any]], enqueued: dict[int, int]) -> None:
    for job_id in enqueued:
        job = jobs.get(job_id)
        if job is None:
            found.lost.append(f"job {job_id}: gone from the table")
        elif enqueued[job_id] == POISON:
            _check_poison(found, job)
        elif job["status"] != "done":
            found.lost.append(f"job {job_id}: ended {job['status']}, expected done")


def _check_poison(found: Findings, job: dict[str, Any]) -> None:
    causes = [str(e.get("error")) for e in job["errors"]]
    if (
        job["status"] == "dead"
        and job["attempts"] == POISON_ATTEMPTS
        and len(causes) == POISON_ATTEMPTS
        and set(causes) <= CRASH_ERRORS
    ):
        found.poison_dead += 1
        return
    found.lost.append(
        f"poison job {job['id']}: ended {job['status']} after {job['attempts']} attempt(s) "
        f"with errors {causes}, expected dead after {POISON_ATTEMPTS} crashes"
    )


def _errors_by_attempt(job: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    by_attempt: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for error in job["errors"]:
        by_attempt[int(error.get("attempt", 0))].append(error)
    return by_attempt


def _check_executions(
    found: Findings, jobs: dict[int, dict[str, Any]], executions: dict[int, list[Execution]]
) -> None:
    for job_id, runs in executions.items():
        job = jobs.get(job_id)
        if job is None:
            continue
        errors = _errors_by_attempt(job)
        final = job["lease_token"] if job["status"] == "done" else None
        for run in runs:
            if run.token == final:
                continue
            kinds = {str(e.get("error", "")) for e in errors.get(run.attempt, [])}
            if any(kind.endswith("FlakyError") for kind in kinds):
                found.planned_failures += 1
            elif kinds:
                found.extra_explained += 1
            else:
                found.unexplained.append(
                    f"job {job_id}: attempt {run.attempt} (token {run.token}) ran on worker "
                    f"{run.worker} with no error, expiry or crash recorded for it"
                )
        _check_overlaps(found, job_id, runs, errors)


def _check_overlaps(
    found: Findings,
    job_id: int,
    runs: list[Execution],
    errors: dict[int, list[dict[str, Any]]],
) -> None:
    for first, second in itertools.pairwise(runs):
        ended = _ended(first, errors.get(first.attempt, []))
        if ended is not None and ended <= second.started:
            continue
        expiries = [
            datetime.fromisoformat(str(e["finished_at"]))
            for e in errors.get(first.attempt, [])
            if e.get("error") == "LeaseExpired" and e.get("finished_at")
        ]
        if not any(expired <= second.started for expired in expiries):
            found.overlaps.append(
                f"job {job_id}: token {second.token} started at {second.started.isoformat()} "
                f"while token {first.token} was running and its lease had not been rescued"
            )


def _ended(run: Execution, errors: list[dict[str, Any]]) -> datetime | None:
    """When an execution ended: its own record, or, when a fault kept it from writing one (its
    connection was cut), the instant its worker reported the failure, which comes after."""
    if run.ended is not None:
        return run.ended
    reported = [
        datetime.fromisoformat(str(e["finished_at"]))
        for e in errors
        if e.get("error") != "LeaseExpired" and e.get("finished_at")
    ]
    return min(reported, default=None)


def _check_writes(
    found: Findings, jobs: dict[int, dict[str, Any]], events: list[dict[str, Any]]
) -> None:
    accepted_done: dict[int, list[int]] = defaultdict(list)
    accepted_results: set[tuple[int, int]] = set()
    refused: set[tuple[int, int, int]] = set()
    newest_claim: dict[int, int] = {}
    sent_stale: dict[tuple[int, int, int], bool] = {}
    for event in events:
        kind = event.get("event")
        if kind == "claim":
            newest_claim[event["job"]] = max(event["token"], newest_claim.get(event["job"], 0))
            continue
        if kind == "heartbeat_send":
            for job_id, token in event["refs"]:
                stale = newest_claim.get(job_id, 0) > token
                sent_stale[(event["pid"], job_id, token)] = stale
                found.stale_heartbeats += stale
            continue
        sender = (event.get("pid", 0), event.get("job", 0), event.get("token", 0))
        if kind == "heartbeat" and event["accepted"] and sent_stale.get(sender):
            found.stale_accepted.append(
                f"job {event['job']} token {event['token']}: a heartbeat sent after a newer "
                f"claim of the job was accepted (process {event['pid']})"
            )
        if kind not in ("finish", "heartbeat"):
            continue
        key = (event["job"], event["token"])
        if not event["accepted"]:
            found.stale_refused += 1
            if event["event"] == "finish":
                refused.add((event["pid"], *key))
            continue
        # Results are reported by one completer per process, in order; heartbeats run beside
        # it, so a refused heartbeat may be logged before the completion it crossed.
        if event["event"] == "finish" and (event["pid"], *key) in refused:
            found.stale_accepted.append(
                f"job {key[0]} token {key[1]}: a {event['event']} was accepted after one was "
                f"refused in process {event['pid']}"
            )
        if event["event"] == "finish":
            if key in accepted_results:
                found.stale_accepted.append(f"job {key[0]} token {key[1]}: two accepted results")
            accepted_results.add(key)
            if event["outcome"] == "done":
                accepted_done[key[0]].append(key[1])
    for job_id, job in jobs.items():
        if job["status"] != "done" or job["task"] == "tick":
            continue
        tokens = accepted_done.get(job_id, [])
        if tokens and tokens != [job["lease_token"]]:
            found.stale_accepted.append(
                f"job {job_id}: accepted completions {tokens}, final token {job['lease_token']}"
            )


def _check_recoveries(
    found: Findings, executions: dict[int, list[Execution]], faults: Sequence[Fault]
) -> None:
    limit = LEASE + RESCUE_INTERVAL + RECOVERY_SLACK
    span = timedelta(seconds=limit)
    outages = [f.at for f in faults if f.kind in DATABASE_OUTAGES + TIER_OUTAGES]
    stops = [f.at for f in faults if f.kind == "stop_worker"]
    for fault in faults:
        if fault.kind != "kill_worker" or fault.target is None:
            continue
        # The bound is for a crash alone. Such recoveries are only measured when the crash met
        # a database outage (a restart or cut connections within the bound before or after it:
        # workers back off for up to 5 s after store errors) or another worker stopped
        # (SIGSTOP lasts twice the lease) around it, which leaves fewer workers to re-run it.
        compound = any(fault.at - span <= outage <= fault.at + span for outage in outages) or any(
            fault.at - timedelta(seconds=2 * LEASE) <= stop <= fault.at + span for stop in stops
        )
        for runs in executions.values():
            for run, after in itertools.pairwise(runs):
                # The next run after the kill: one that began before it followed a rescue of
                # its own (the worker had been stopped), not this crash.
                cut = run.worker == str(fault.target) and run.started <= fault.at < after.started
                if cut and (run.ended is None or run.ended > fault.at):
                    took = (after.started - fault.at).total_seconds()
                    if compound:
                        found.compound_recoveries.append(took)
                        continue
                    found.recoveries.append(took)
                    if took > limit:
                        found.slow_recoveries.append(
                            f"job {run.job}: re-ran {took:.2f}s after its worker was killed "
                            f"(limit {limit:.1f}s)"
                        )


def _check_ticks(
    found: Findings, jobs: dict[int, dict[str, Any]], paused: frozenset[int] = frozenset()
) -> None:
    ticks = sorted(job["tick"] for job in jobs.values() if job["schedule"] == "tick")
    if not ticks:
        return
    if len(ticks) != len(set(ticks)):
        found.ticks.append("a cron tick fired twice")
    expected = int((ticks[-1] - ticks[0]).total_seconds()) + 1
    if len(set(ticks)) != expected:
        found.ticks.append(f"{expected - len(set(ticks))} cron tick(s) missing")
    not_done = [
        job["id"]
        for job in jobs.values()
        if job["schedule"] == "tick" and job["status"] != "done" and job["id"] not in paused
    ]
    if not_done:
        found.ticks.append(f"tick jobs not done: {not_done[:5]}")


def _check_retry_delays(
    found: Findings,
    jobs: dict[int, dict[str, Any]],
    executions: dict[int, list[Execution]],
    enqueued: dict[int, int],
    ks_alpha: float,
) -> None:
    fractions: list[float] = []
    for job_id, planned in enqueued.items():
        if planned <= 0 or job_id not in jobs:
            continue
        errors = _errors_by_attempt(jobs[job_id])
        scheduled = {run.attempt: run.scheduled for run in executions.get(job_id, [])}
        for attempt in range(1, planned + 1):
            failure = [e for e in errors.get(attempt, []) if _is_planned(e)]
            if not failure or attempt + 1 not in scheduled:
                continue
            # The retry's run_at, as the claim found it, less the failure's instant: the delay
            # the worker drew, whatever kept the retry waiting after it fell due.
            failed_at = datetime.fromisoformat(str(failure[0]["finished_at"]))
            delay = (scheduled[attempt + 1] - failed_at).total_seconds()
            window = BACKOFF.window(attempt)
            found.retries_measured += 1
            if not -DELAY_ROUNDING <= delay <= window + DELAY_ROUNDING:
                found.retry_delays.append(
                    f"job {job_id}: retry after attempt {attempt} was due {delay:.6f}s after "
                    f"the failure, outside [0, {window:.2f}]"
                )
            fractions.append(min(1.0, max(0.0, delay / window)))
    if len(fractions) >= MIN_KS_SAMPLES:
        found.ks_statistic = ks_uniform(fractions)
        critical = ks_critical(len(fractions), ks_alpha)
        if found.ks_statistic > critical:
            found.retry_delays.append(
                f"retry delays are not uniform over their windows: KS D={found.ks_statistic:.3f} "
                f"> {critical:.3f} (n={len(fractions)})"
            )


def _is_planned(error: dict[str, Any]) -> bool:
    return str(error.get("error", "")).endswith("FlakyError")


def ks_critical(n: int, alpha: float) -> float:
    """The asymptotic critical value of the one-sample KS statistic: sqrt(-ln(alpha/2) / 2n),
    1.63/sqrt(n) at alpha 0.01."""
    return math.sqrt(-math.log(alpha / 2) / (2 * n))


def ks_uniform(values: Sequence[float]) -> float:
    """The Kolmogorov-Smirnov statistic of `values` against the uniform distribution on [0, 1]."""
    ordered = sorted(values)
    n = len(ordered)
    return max(max((i + 1) / n - value, value - i / n) for i, value in enumerate(ordered))
