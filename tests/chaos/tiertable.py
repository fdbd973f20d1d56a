"""The rows of the tiered fleet's table in docs/reliability.md, one per scenario."""

from __future__ import annotations

from collections import Counter

from tests.chaos.checker import Findings
from tests.chaos.runner import Outcome
from tests.chaos.tiercheck import TierFindings
from tests.chaos.tiered import TTL

HEADER = (
    "| scenario | faults injected | runs | jobs | executions | lost | extra runs (all "
    "explained) | unexplained | stale writes refused / accepted | overlaps | failover, max "
    f"(bound {TTL + 1:g} s) | first move after a Redis restart, max | timers fired twice | "
    "other violations | reproduce |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def tier_row(group: list[Outcome], faults: str, reproduce: str) -> str:
    found = [o.findings for o in group]
    tiers = [f.tier for f in found if f.tier is not None]
    cells = [
        group[0].scenario.name,
        faults,
        str(len(group)),
        str(sum(f.jobs for f in found)),
        str(sum(f.executions for f in found)),
        str(sum(len(f.lost) for f in found)),
        str(sum(f.extra_explained for f in found)),
        str(sum(len(f.unexplained) for f in found)),
        _stale(found, tiers),
        str(sum(len(f.overlaps) for f in found)),
        _failover(tiers),
        _seconds([s for t in tiers for s in t.redis_recoveries]),
        _fired_twice(tiers),
        str(sum(_others(f) for f in found)),
        reproduce,
    ]
    return "| " + " | ".join(cells) + " |"


def _stale(found: list[Findings], tiers: list[TierFindings]) -> str:
    refused = sum(t.stale_refused for t in tiers)
    accepted = sum(len(t.stale_accepted) for t in tiers) + sum(len(f.stale_accepted) for f in found)
    moves = sum(t.stale_moves_refused for t in tiers)
    resumed = sum(t.resumed_stale for t in tiers)
    workers = sum(f.stale_refused for f in found)
    held: Counter[str] = Counter()
    for tier in tiers:
        held.update(tier.held_answers)
    text = f"{refused} / {accepted} (Redis: {moves} of them moves; {resumed} sent by resumed "
    text += "or reconnected leaders"
    if held:
        answers = ", ".join(f"{count} {result}" for result, count in sorted(held.items()))
        text += f"; held by a cut and answered after the heal: {answers}"
    return text + f"); workers' stale results refused: {workers}"


def _failover(tiers: list[TierFindings]) -> str:
    alone = [s for t in tiers for s in t.failovers]
    compound = [s for t in tiers for s in t.compound_failovers]
    text = _seconds(alone)
    if compound:
        text += f"; beside another leader fault or an etcd fault {_seconds(compound)}"
    return text


def _fired_twice(tiers: list[TierFindings]) -> str:
    twice = sum(len(t.double_fires) for t in tiers)
    duplicates = sum(t.duplicate_entries for t in tiers)
    return f"{twice} ({duplicates} duplicate entries dropped by the claim)"


def _seconds(values: list[float]) -> str:
    return f"{max(values):.2f} s (n={len(values)})" if values else "-"


def _others(found: Findings) -> int:
    tier = found.tier
    shown = len(found.lost) + len(found.unexplained) + len(found.stale_accepted)
    shown += len(found.overlaps)
    if tier is not None:
        shown += len(tier.stale_accepted) + len(tier.double_fires)
    return len(found.violations) - shown
