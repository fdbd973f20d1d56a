"""The tier rules of the history checker, for runs over a tiered fleet. They read the lines the
chaos schedulers (tests.chaos.scheduler_main) and workers (tests.chaos.worker_main) append to the
run's one history file, and what the fault injector measured.

- **stale writes accepted**: a stage or move Redis accepted for a partition whose epoch is lower
  than one that took the partition over before the write was sent (the take-over's line comes
  first in the file). A forced take-over (a leader overriding an epoch only a rebuilt etcd can
  explain) starts the partition's epochs again from its own. Stale writes refused are counted,
  and those sent by a leader after it was resumed from SIGSTOP are counted apart.
- **timers fired twice**: a stream entry (job, staged token) started an attempt at most once; a
  second entry for it (a re-stage, a new leader) must be dropped by the claim.
- **failover**: after a partition leader is SIGKILLed, every partition has a live leader again
  within `leader_ttl + 1 s` (measured by the injector from etcd), unless etcd lost a member or
  its quorum, or another leader was killed or stopped, around it (then it is measured, not
  bounded: a second kill within the bound can take the scheduler that was about to lead the
  first one's partitions, and its member key holds its share until its own lease expires).
- **no leader change on a member loss**: while one etcd member of three is down, and for
  `leader_ttl` after it is back, no partition is taken over with a new epoch (checked when no
  other fault that moves leaders overlaps).
- **nothing moved without quorum**: no stage or move is accepted that was sent while etcd had
  no quorum, past the trust window of the last renewal etcd could still grant. A raft leader
  left alone still renews leases until it notices that it lost its quorum (etcd's CheckQuorum:
  within two election timeouts), so that renewal can come up to 2 election timeouts after the
  loss: a leader may act until 2 x election timeout + ttl / 2 into it, and not after. No other
  leader can be elected meanwhile, as that takes a quorum.
- **no write past the trust window**: a leader cut off from every etcd member (a network
  partition; it still reaches Redis and PostgreSQL) sends no fenced write later than
  `leader_ttl / 2` (+ the send slack) into the cut: its last renewal was sent before the cut,
  and a renewal proves the lease for `ttl` but is trusted for half of it. Its writes after the
  heal are judged like a resumed leader's.
- **Redis restarts** are measured: the time from the restart to the first job moved again.
- **no stream growth**: jobs of a queue no worker reads have at most one entry each on the
  streams at the end of the run, however long their entries waited.
- **etcd rebuilt**: after etcd is replaced by a new cluster (its revisions, the epochs, start
  again below those Redis holds), some leader takes a partition over from the old epochs.
- **writes held by a network cut** (a leader cut off from Redis): those sent during the cut and
  answered after the heal are counted by their answer; the epoch decides them, as any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SEND_SLACK = 0.25  # seconds between a leader's trust check and its send line, at most


@dataclass(frozen=True, slots=True)
class Window:
    """A fault that lasted: wall-clock seconds (time.time()) of its start and end."""

    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Failover:
    killed_at: float  # wall clock
    seconds: float | None  # None: no full set of live leaders was seen in time


@dataclass(frozen=True, slots=True)
class Cut:
    """A scheduler process cut off from a server by the network, wall-clock seconds."""

    pid: int
    start: float  # taken once the cut was in place
    end: float  # taken once it was healed


@dataclass(slots=True)
class TierFaults:
    """What the injector did and measured, for the tier rules."""

    ttl: float
    election_timeout: float  # of the etcd cluster
    failovers: list[Failover] = field(default_factory=list)
    resumed: list[tuple[int, float]] = field(default_factory=list)  # (pid, wall) after SIGCONT
    member_losses: list[Window] = field(default_factory=list)
    quorum_losses: list[Window] = field(default_factory=list)
    redis_restarts: list[float] = field(default_factory=list)  # wall, once it answered again
    leader_faults: list[float] = field(default_factory=list)  # kills and stops of leaders
    etcd_cuts: list[Cut] = field(default_factory=list)  # a leader cut off from every member
    redis_cuts: list[Cut] = field(default_factory=list)  # a leader cut off from Redis


@dataclass(slots=True)
class TierFindings:
    writes: int = 0  # fenced writes answered by Redis
    moves: int = 0
    stale_refused: int = 0
    stale_moves_refused: int = 0
    resumed_stale: int = 0  # writes of leaders resumed from SIGSTOP naming a superseded epoch
    resumed_refused: int = 0  # of those, refused by Redis (the rest are violations)
    duplicate_entries: int = 0  # entries for a (job, token) already delivered, dropped
    failovers: list[float] = field(default_factory=list)
    compound_failovers: list[float] = field(default_factory=list)
    redis_recoveries: list[float] = field(default_factory=list)
    stale_accepted: list[str] = field(default_factory=list)
    double_fires: list[str] = field(default_factory=list)
    slow_failovers: list[str] = field(default_factory=list)
    leader_changes: list[str] = field(default_factory=list)
    moved_without_quorum: list[str] = field(default_factory=list)
    past_trust: list[str] = field(default_factory=list)
    stream_growth: list[str] = field(default_factory=list)
    not_overridden: list[str] = field(default_factory=list)
    held_answers: Counter[str] = field(default_factory=Counter)  # result -> writes held by a cut

    @property
    def violations(self) -> list[str]:
        return [
            *self.stale_accepted,
            *self.double_fires,
            *self.slow_failovers,
            *self.leader_changes,
            *self.moved_without_quorum,
            *self.past_trust,
            *self.stream_growth,
            *self.not_overridden,
        ]


@dataclass(slots=True)
class _Sent:
    wall: float
    newest: int  # the highest epoch that had taken the partition over when this was sent


def check_tier(events: Sequence[dict[str, Any]], faults: TierFaults) -> TierFindings:
    found = TierFindings()
    writes = _check_writes(found, events, faults)
    _check_fires(found, events)
    _check_failovers(found, faults)
    _check_member_losses(found, events, faults)
    _check_quorum_losses(found, writes, faults)
    _measure_redis(found, writes, faults)
    _check_trust(found, events, faults)
    _count_held(found, writes, faults)
    return found


def _check_writes(
    found: TierFindings, events: Sequence[dict[str, Any]], faults: TierFaults
) -> list[tuple[_Sent, dict[str, Any]]]:
    """Each answered write with what was known when it was sent, in the file's order."""
    newest: dict[int, int] = {}
    sent: dict[tuple[int, int], _Sent] = {}
    answered: list[tuple[_Sent, dict[str, Any]]] = []
    resumed: dict[int, float] = {}  # pid -> its first resume (a leader may be stopped twice)
    for pid, at in sorted(faults.resumed, key=lambda resume: resume[1]):
        resumed.setdefault(pid, at)
    for event in events:
        kind = event.get("event")
        if kind == "tier_takeover" and event["accepted"]:
            partition = event["partition"]
            if event.get("force"):
                # etcd was rebuilt: its epochs start again, lower; the old ones are void.
                newest[partition] = event["epoch"]
            else:
                newest[partition] = max(newest.get(partition, 0), event["epoch"])
        elif kind == "tier_send":
            sent[(event["pid"], event["call"])] = _Sent(
                event["wall"], newest.get(event["partition"], 0)
            )
        elif kind == "tier_write":
            before = sent.pop((event["pid"], event["call"]), None)
            if before is not None:
                answered.append((before, event))
                _judge_write(found, before, event, resumed)
    return answered


def _judge_write(
    found: TierFindings, sent: _Sent, event: dict[str, Any], resumed: dict[int, float]
) -> None:
    if event["result"] == "error":
        return
    found.writes += 1
    found.moves += event["op"] == "move"
    after = resumed.get(event["pid"])
    if after is not None and sent.wall >= after and event["epoch"] < sent.newest:
        found.resumed_stale += 1
        found.resumed_refused += event["result"] == "stale"
    if event["result"] == "stale":
        found.stale_refused += 1
        found.stale_moves_refused += event["op"] == "move"
    elif event["result"] == "ok" and event["epoch"] < sent.newest:
        found.stale_accepted.append(
            f"partition {event['partition']}: a {event['op']} with epoch {event['epoch']} by "
            f"process {event['pid']} was accepted after epoch {sent.newest} took it over"
        )


def _check_fires(found: TierFindings, events: Sequence[dict[str, Any]]) -> None:
    delivered: Counter[tuple[int, int]] = Counter()
    started: Counter[tuple[int, int]] = Counter()
    for event in events:
        if event.get("event") != "confirm":
            continue
        delivered.update((job, token) for job, token in event["refs"])
        started.update((job, token) for job, token in event["claimed"])
    found.duplicate_entries = sum(count - 1 for count in delivered.values())
    for (job, token), count in sorted(started.items()):
        if count > 1:
            found.double_fires.append(
                f"job {job}: the timer staged with token {token} started {count} attempts"
            )


def _check_failovers(found: TierFindings, faults: TierFaults) -> None:
    bound = faults.ttl + 1.0
    disturbed = faults.member_losses + faults.quorum_losses
    for failover in faults.failovers:
        span = Window(failover.killed_at - 2 * faults.ttl, failover.killed_at + bound)
        compound = any(_overlap(span, window) for window in disturbed) or any(
            span.start <= other <= span.end
            for other in faults.leader_faults
            if other != failover.killed_at
        )
        if failover.seconds is None:
            found.slow_failovers.append(
                f"partition leader killed at {failover.killed_at:.3f}: never led again in time"
            )
        elif compound:
            found.compound_failovers.append(failover.seconds)
        else:
            found.failovers.append(failover.seconds)
            if failover.seconds > bound:
                found.slow_failovers.append(
                    f"partitions of a leader killed at {failover.killed_at:.3f} were led again "
                    f"after {failover.seconds:.2f}s (bound {bound:.1f}s)"
                )


def _overlap(a: Window, b: Window) -> bool:
    return a.start <= b.end and b.start <= a.end


def _check_member_losses(
    found: TierFindings, events: Sequence[dict[str, Any]], faults: TierFaults
) -> None:
    others = [Window(at - faults.ttl, at + 3 * faults.ttl) for at in faults.leader_faults]
    others += [Window(w.start, w.end + 2 * faults.ttl) for w in faults.quorum_losses]
    others += [Window(at - faults.ttl, at + faults.ttl) for at in faults.redis_restarts]
    newest: dict[int, int] = {}
    for event in events:
        if event.get("event") != "tier_takeover" or not event["accepted"]:
            continue
        partition, epoch = event["partition"], event["epoch"]
        before = newest.get(partition)
        newest[partition] = max(before or 0, epoch)
        if before is None or epoch <= before:
            continue
        for loss in faults.member_losses:
            window = Window(loss.start, loss.end + faults.ttl)
            alone = not any(_overlap(window, other) for other in others)
            if alone and window.start <= event["wall"] <= window.end:
                found.leader_changes.append(
                    f"partition {partition}: new leader (epoch {epoch}, process {event['pid']}) "
                    f"while an etcd member was lost"
                )


def _check_quorum_losses(
    found: TierFindings, writes: list[tuple[_Sent, dict[str, Any]]], faults: TierFaults
) -> None:
    for loss in faults.quorum_losses:
        start = loss.start + 2 * faults.election_timeout + faults.ttl / 2 + SEND_SLACK
        for sent, event in writes:
            if event["result"] == "ok" and start <= sent.wall <= loss.end:
                found.moved_without_quorum.append(
                    f"partition {event['partition']}: a {event['op']} (epoch {event['epoch']}) "
                    f"was accepted {sent.wall - loss.start:.2f}s into an etcd quorum loss"
                )


def _measure_redis(
    found: TierFindings, writes: list[tuple[_Sent, dict[str, Any]]], faults: TierFaults
) -> None:
    for restarted in faults.redis_restarts:
        moved = [
            event["wall"]
            for sent, event in writes
            if event["op"] == "move" and event["moved"] and sent.wall >= restarted
        ]
        if moved:
            found.redis_recoveries.append(min(moved) - restarted)


def _check_trust(found: TierFindings, events: Sequence[dict[str, Any]], faults: TierFaults) -> None:
    for cut in faults.etcd_cuts:
        trusted_until = cut.start + faults.ttl / 2 + SEND_SLACK
        for event in events:
            if (
                event.get("event") == "tier_send"
                and event["pid"] == cut.pid
                and trusted_until <= event["wall"] <= cut.end
            ):
                found.past_trust.append(
                    f"partition {event['partition']}: process {cut.pid} sent a {event['op']} "
                    f"(epoch {event['epoch']}) {event['wall'] - cut.start:.2f}s into its cut "
                    f"from etcd, past its trust window ({faults.ttl / 2:g}s)"
                )


def _count_held(
    found: TierFindings, writes: list[tuple[_Sent, dict[str, Any]]], faults: TierFaults
) -> None:
    for cut in faults.redis_cuts:
        for sent, event in writes:
            if event["pid"] == cut.pid and cut.start <= sent.wall <= cut.end < event["wall"]:
                found.held_answers[event["result"]] += 1
