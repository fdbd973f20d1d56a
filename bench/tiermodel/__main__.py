"""The command: measure or load costs, plan a fleet, print the report (and write it as JSON)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.machine import describe
from bench.tiermodel.costs import Costs, CostsError, median_costs
from bench.tiermodel.measure import MeasureError, MeasureSettings, measure
from bench.tiermodel.model import Fleet, Plan, plan, saturation

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
SWEEP = (0.25, 0.5, 1.0, 2.0, 4.0)
ASSUMPTIONS = (
    "A model, not a fleet: every cost is taken as linear (no contention, cache misses, disk "
    "reads, vacuum or replication beyond what the small measurement saw).",
    "Steady state: each job enqueued, staged, moved, read, claimed by id and finished once; "
    "the horizon (min(pending, rate × stage_horizon) jobs) read again every stage_interval.",
    "Even spread: the busiest scheduler or Redis shard carries ceil(partitions / units) "
    "partitions.",
    "One core per scheduler process (Python) and per Redis shard (main thread); PostgreSQL is "
    "one primary with --cores cores; etcd's leader member serves every renewal and read.",
    "Batches as measured: inserts 1,000 a call, claims by id and finishes 100 a call, moves "
    "--move-batch a call; workers that confirm a few entries at a time pay more per job.",
    "Units are sized for the target utilisation; workers and the network are not modelled.",
)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tiermodel", description=__doc__)
    parser.add_argument("--rate", type=float, default=100_000, help="timers due a second")
    parser.add_argument("--pending", type=int, default=10_000_000, help="jobs pending")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--cores", type=int, default=16, help="cores per machine")
    parser.add_argument("--memory-gib", type=float, default=64.0, help="memory per machine")
    parser.add_argument("--horizon", type=float, default=60.0, help="stage_horizon, seconds")
    parser.add_argument("--move-batch", type=int, default=1_000)
    parser.add_argument("--leader-ttl", type=float, default=5.0)
    parser.add_argument("--schedulers", type=int, help="scheduler processes (default: sized)")
    parser.add_argument("--redis-shards", type=int, help="Redis shards (default: sized)")
    parser.add_argument("--target", type=float, default=0.7, help="utilisation sized for")
    parser.add_argument("--costs", type=Path, help="read costs from this JSON, measure nothing")
    parser.add_argument("--save-costs", type=Path, help="write the costs measured here")
    parser.add_argument("--json", type=Path, help="write the report as JSON here too")
    parser.add_argument("--quick", action="store_true", help="smaller measurements (~seconds)")
    parser.add_argument(
        "--repeats", type=int, help="measurements, each figure's median (default 3, quick 1)"
    )
    parser.add_argument("--pg-dsn", default=os.environ.get("CHRONOQ_TEST_PG_DSN", DEFAULT_PG))
    parser.add_argument("--redis-url", default=os.environ.get("CHRONOQ_BENCH_REDIS", DEFAULT_REDIS))
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.pending < 0 or args.partitions < 1 or args.cores < 1:
        parser.error("--rate must be above 0, --pending 0 or more, --partitions and --cores 1+")
    if not 0 < args.target <= 1:
        parser.error("--target is a utilisation, above 0 and at most 1")
    return args


def fleet_from(args: argparse.Namespace) -> Fleet:
    return Fleet(
        rate=args.rate,
        pending=args.pending,
        partitions=args.partitions,
        cores=args.cores,
        memory_gib=args.memory_gib,
        horizon=args.horizon,
        move_batch=args.move_batch,
        leader_ttl=args.leader_ttl,
        schedulers=args.schedulers,
        redis_shards=args.redis_shards,
        target=args.target,
    )


def costs_from(args: argparse.Namespace) -> Costs:
    if args.costs is not None:
        return Costs.load(args.costs)
    sizes = {"jobs": 2_000, "timers": 5_000, "wheel_timers": 10_000, "etcd_requests": 50}
    settings = MeasureSettings(args.pg_dsn, args.redis_url, **(sizes if args.quick else {}))
    repeats = args.repeats or (1 if args.quick else 3)
    costs = median_costs([measure(settings, log=_stderr) for _ in range(max(1, repeats))])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    machine = describe(args.pg_dsn, args.redis_url) | {"load_average_1m": load}
    return replace(costs, machine=machine)


def _stderr(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def report(costs: Costs, fleet: Fleet) -> dict[str, Any]:
    chosen = plan(costs, fleet)
    rate, limit = saturation(costs, fleet)
    sweep = [plan(costs, replace(fleet, rate=fleet.rate * f)) for f in SWEEP]
    return {
        "fleet": asdict(fleet),
        "costs": costs.to_json(),
        "resources": [asdict(r) for r in chosen.resources],
        "bottleneck": chosen.bottleneck.name,
        "first_change": chosen.bottleneck.change,
        "saturates_at": {"rate": rate, "resource": limit},
        "sweep": [_sweep_row(p) for p in sweep],
        "assumptions": list(ASSUMPTIONS),
    }


def _sweep_row(p: Plan) -> dict[str, Any]:
    return {
        "rate": p.fleet.rate,
        "utilisation": {r.name: round(r.utilisation, 4) for r in p.resources},
        "units": {r.name: r.units for r in p.resources},
        "bottleneck": p.bottleneck.name,
    }


def render(result: dict[str, Any]) -> str:
    fleet, costs = result["fleet"], result["costs"]
    lines = [
        f"Fleet: {fleet['rate']:,.0f} timers/s due, {fleet['pending']:,} pending, "
        f"{fleet['partitions']} partitions, {fleet['cores']} cores and {fleet['memory_gib']:g} "
        f"GiB a machine, stage_horizon {fleet['horizon']:g} s, move batch "
        f"{fleet['move_batch']:,}, leader_ttl {fleet['leader_ttl']:g} s, sized for "
        f"{fleet['target']:.0%}.",
        "",
        *_costs_lines(costs),
        "",
        "| resource | units | busiest unit | at the most units | load |",
        "|---|---|---|---|---|",
    ]
    for r in result["resources"]:
        lines.append(
            f"| {r['name']} | {r['units']} | {r['utilisation']:.0%} | {r['ceiling']:.0%} "
            f"| {r['load']} |"
        )
    saturates = result["saturates_at"]
    lines += [
        "",
        f"Bottleneck (least room left, counting units that can still be added): "
        f"{result['bottleneck']}. First change: {result['first_change']}.",
        f"This fleet (its partitions and machines) passes 100% first at about "
        f"{saturates['rate']:,.0f} timers/s: {saturates['resource']}.",
        "",
        *_sweep_lines(result["sweep"]),
        "",
        "Assumptions:",
        *(f"- {a}" for a in result["assumptions"]),
    ]
    return "\n".join(lines)


def _costs_lines(costs: dict[str, Any]) -> list[str]:
    machine = costs.get("machine") or {}
    where = (
        f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores"
        + (
            f", load average {machine['load_average_1m']:.1f} when measured"
            if machine.get("load_average_1m") is not None
            else ""
        )
        + f", PostgreSQL {machine.get('postgres', '?')}, Redis {machine.get('redis', '?')}"
        + f", chronoq {machine.get('chronoq_commit', '?')}"
        if machine
        else "unknown machine"
    )
    moves = ", ".join(f"{b}: {us:g}" for b, us in costs["redis_move_us"].items())
    assumed = sorted(k for k, v in costs["sources"].items() if v.startswith("assumed"))
    return [
        f"Costs ({where}), µs of the resource's CPU: PostgreSQL insert "
        f"{costs['pg_insert_us']:g}, claim by id {costs['pg_claim_us']:g}, finish "
        f"{costs['pg_finish_us']:g} per job, horizon query {costs['pg_stage_row_us']:g} per row; "
        f"Redis stage {costs['redis_stage_us']:g}, move by batch ({moves}), consume "
        f"{costs['redis_consume_us']:g} per timer; scheduler wheel {costs['sched_wheel_us']:g}, "
        f"Redis client {costs['sched_redis_us']:g} per timer, row read "
        f"{costs['sched_stage_row_us']:g}; etcd keep-alive {costs['etcd_keepalive_us']:g}, "
        f"range of {costs['etcd_range_keys']} keys {costs['etcd_range_us']:g}.",
        "Assumed, not measured: " + (", ".join(assumed) if assumed else "nothing") + ".",
    ]


def _sweep_lines(sweep: list[dict[str, Any]]) -> list[str]:
    names = list(sweep[0]["utilisation"])
    lines = [
        "The same fleet at other rates (busiest unit; units sized unless given):",
        "",
        "| timers/s | " + " | ".join(names) + " | bottleneck |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for row in sweep:
        cells = [f"{row['utilisation'][n]:.0%} ({row['units'][n]})" for n in names]
        lines.append(f"| {row['rate']:,.0f} | " + " | ".join(cells) + f" | {row['bottleneck']} |")
    return lines


def main(argv: Sequence[str]) -> int:
    args = parse(argv)
    try:
        costs = costs_from(args)
    except (CostsError, MeasureError) as exc:
        print(f"cannot use the costs: {exc}", file=sys.stderr)
        return 2
    if args.save_costs:
        costs.save(args.save_costs)
    result = report(costs, fleet_from(args))
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
