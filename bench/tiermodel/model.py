"""The sizing model: per-operation costs times a fleet's rates, per resource, against what one
unit of that resource has (cores, memory), with the busiest unit's utilisation.

A model, not a measurement of a fleet. It assumes:

- costs are linear: what a small batch cost on one machine, each of a million costs the same
  (no lock contention, cache misses, disk reads, vacuum or replication beyond what the
  micro-measurement saw);
- steady state: every job is enqueued, staged, moved, read, claimed and finished once (no
  retries), timers fall due at `rate` a second, and the horizon holds min(pending, rate
  times horizon) jobs, all read again every `stage_interval`;
- jobs spread evenly over partitions (partition = id % partitions), and partitions as evenly as
  they can over scheduler processes and Redis shards: the busiest unit carries ceil(P / N) of P;
- a scheduler is one Python process (one core at most, the GIL), a Redis shard one main thread
  (one core), PostgreSQL one primary with `cores` cores for its backends; etcd's leader member
  serves every keep-alive and range read;
- units are sized for `target` utilisation (70%: headroom for bursts, failover and the work not
  modelled); workers, their handlers and the network are not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from bench.tiermodel.costs import Costs

GIB = 2**30


@dataclass(frozen=True)
class Fleet:
    rate: float  # timers falling due a second (jobs run a second, in steady state)
    pending: int  # jobs pending in PostgreSQL
    partitions: int = 64
    cores: int = 16  # per machine
    memory_gib: float = 64.0  # per machine
    horizon: float = 60.0  # stage_horizon, seconds
    stage_interval: float = 1.0
    move_batch: int = 1_000
    leader_ttl: float = 5.0
    schedulers: int | None = None  # None: as many as `target` needs, at most partitions
    redis_shards: int | None = None  # None: as many as `target` needs, at most partitions
    target: float = 0.7

    @property
    def horizon_rows(self) -> float:
        """Jobs pending within the horizon: what each full staging pass reads again."""
        return min(float(self.pending), self.rate * self.horizon)

    @property
    def step_interval(self) -> float:
        """How often each scheduler renews its lease and reads the election prefix."""
        return min(0.5, self.leader_ttl / 10)


@dataclass(frozen=True)
class Resource:
    name: str
    units: int  # machines, shards or processes the fleet needs (or was given)
    utilisation: float  # of the busiest unit
    load: str  # the demand in its own unit
    change: str  # the first thing to change when this resource limits
    # The busiest unit's utilisation at the most units this fleet allows: the count given, or
    # one per partition for Redis shards and schedulers; the utilisation for the others.
    ceiling: float


@dataclass(frozen=True)
class Plan:
    fleet: Fleet
    resources: list[Resource]

    @property
    def bottleneck(self) -> Resource:
        """The resource with the least room left, counting the units that may still be added
        (a sized resource sits below target by construction; what limits is what cannot grow)."""
        return max(self.resources, key=lambda r: r.ceiling)

    def resource(self, name: str) -> Resource:
        return next(r for r in self.resources if r.name == name)


def plan(costs: Costs, fleet: Fleet) -> Plan:
    schedulers = _units(fleet.schedulers, scheduler_us(costs, fleet), fleet)
    return Plan(
        fleet,
        [
            postgres_cpu(costs, fleet),
            postgres_memory(costs, fleet),
            redis_cpu(costs, fleet),
            redis_memory(costs, fleet),
            scheduler_cpu(costs, fleet, schedulers),
            etcd_cpu(costs, fleet, schedulers),
        ],
    )


def saturation(costs: Costs, fleet: Fleet) -> tuple[float, str]:
    """The lowest rate at which some resource of this fleet (its partitions, cores and given
    unit counts kept) passes 100%, and which one; (inf, "") if none does below 1e9/s."""

    def over(rate: float) -> bool:
        return plan(costs, replace(fleet, rate=rate)).bottleneck.ceiling >= 1.0

    low, high = 0.0, max(fleet.rate, 1.0)
    while not over(high):
        low, high = high, high * 2
        if high > 1e9:
            return math.inf, ""
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (low, middle) if over(middle) else (middle, high)
    return high, plan(costs, replace(fleet, rate=high)).bottleneck.name


# -- PostgreSQL -------------------------------------------------------------------------------


def postgres_parts_us(costs: Costs, fleet: Fleet) -> dict[str, float]:
    """Backend CPU µs a second, by what spends it."""
    return {
        "insert": fleet.rate * costs.pg_insert_us,
        "claim by id": fleet.rate * costs.pg_claim_us,
        "finish": fleet.rate * costs.pg_finish_us,
        # New jobs are read once on their NOTIFY; the horizon again at every full pass.
        "stage new": fleet.rate * costs.pg_stage_row_us,
        "horizon re-read": fleet.horizon_rows / fleet.stage_interval * costs.pg_stage_row_us,
    }


def postgres_cpu(costs: Costs, fleet: Fleet) -> Resource:
    parts = postgres_parts_us(costs, fleet)
    cores = sum(parts.values()) / 1e6
    horizon_share = parts["horizon re-read"] / max(sum(parts.values()), 1e-9)
    wal_mib = fleet.rate * costs.pg_wal_bytes_per_job / 2**20
    if horizon_share > 0.5:
        change = (
            f"lower stage_horizon: its re-read is {horizon_share:.0%} of PostgreSQL's CPU "
            "(5-10 s still stages each job seconds before it falls due)"
        )
    else:
        change = (
            "partition the jobs table (hash by id, one table per group of tier partitions), "
            "then split the tier partitions over several PostgreSQL primaries: claim and "
            "finish are one row update per job each, already batched"
        )
    load = (
        f"{cores:.1f} cores ("
        + ", ".join(f"{name} {us / 1e6:.1f}" for name, us in parts.items())
        + f"); WAL {wal_mib:.0f} MiB/s"
    )
    return Resource("PostgreSQL CPU", 1, cores / fleet.cores, load, change, cores / fleet.cores)


def postgres_memory(costs: Costs, fleet: Fleet) -> Resource:
    size = fleet.pending * costs.pg_row_bytes
    share = size / (fleet.memory_gib * GIB)
    return Resource(
        "PostgreSQL memory",
        1,
        share,
        f"{size / GIB:.1f} GiB of table and indexes for {fleet.pending:,} pending jobs",
        "partition the jobs table so only the partitions near due stay hot; or more memory",
        share,
    )


# -- Redis ------------------------------------------------------------------------------------


def redis_us(costs: Costs, fleet: Fleet) -> float:
    per_timer = costs.redis_stage_us + costs.move_us(fleet.move_batch) + costs.redis_consume_us
    return fleet.rate * per_timer


def redis_cpu(costs: Costs, fleet: Fleet) -> Resource:
    demand = redis_us(costs, fleet)
    shards = _units(fleet.redis_shards, demand, fleet)
    utilisation = demand * _busiest_share(fleet.partitions, shards) / 1e6
    if shards < fleet.partitions:
        change = (
            f"Redis Cluster with more shards (now {shards}; a partition's keys share one hash "
            "tag, so up to one shard per partition)"
        )
    else:
        change = "more partitions (an offline step), then more Redis shards"
    load = f"{demand / 1e6:.2f} cores of Redis main thread over {shards} shard(s)"
    ceiling = demand * _busiest_share(fleet.partitions, _most(fleet.redis_shards, fleet)) / 1e6
    return Resource("Redis CPU", shards, utilisation, load, change, ceiling)


def redis_memory(costs: Costs, fleet: Fleet) -> Resource:
    demand = redis_us(costs, fleet)
    shards = _units(fleet.redis_shards, demand, fleet)
    size = fleet.horizon_rows * costs.redis_bytes_per_timer
    memory = fleet.memory_gib * GIB
    most = _most(fleet.redis_shards, fleet)
    return Resource(
        "Redis memory",
        shards,
        size * _busiest_share(fleet.partitions, shards) / memory,
        f"{size / GIB:.2f} GiB of staged timers ({fleet.horizon_rows:,.0f} in the horizon)",
        "lower stage_horizon, or more Redis shards",
        size * _busiest_share(fleet.partitions, most) / memory,
    )


# -- schedulers -------------------------------------------------------------------------------


def scheduler_us(costs: Costs, fleet: Fleet) -> float:
    per_timer = costs.sched_wheel_us + costs.sched_redis_us + costs.sched_stage_row_us
    rereads = fleet.horizon_rows / fleet.stage_interval * costs.sched_stage_row_us
    return fleet.rate * per_timer + rereads


def scheduler_cpu(costs: Costs, fleet: Fleet, processes: int) -> Resource:
    demand = scheduler_us(costs, fleet)
    utilisation = demand * _busiest_share(fleet.partitions, processes) / 1e6
    machines = math.ceil(processes / fleet.cores)
    if processes < fleet.partitions:
        change = f"more scheduler processes (now {processes}, up to one per partition)"
    else:
        change = "more partitions (an offline step), then more scheduler processes"
    load = (
        f"{demand / 1e6:.1f} cores of Python over {processes} process(es) on {machines} "
        f"machine(s); wheels hold {fleet.horizon_rows * costs.sched_bytes_per_timer / GIB:.2f} GiB"
    )
    ceiling = demand * _busiest_share(fleet.partitions, _most(fleet.schedulers, fleet)) / 1e6
    return Resource("scheduler CPU", processes, utilisation, load, change, ceiling)


# -- etcd -------------------------------------------------------------------------------------


def etcd_cpu(costs: Costs, fleet: Fleet, schedulers: int) -> Resource:
    steps = schedulers / fleet.step_interval
    keys = fleet.partitions + schedulers
    per_step = costs.etcd_keepalive_us + costs.etcd_range_us * keys / costs.etcd_range_keys
    demand = steps * per_step
    load = (
        f"{steps:,.0f} lease renewals/s and as many range reads of {keys} keys "
        f"({fleet.step_interval:g} s steps): {demand / 1e6:.3f} cores"
    )
    change = (
        "fewer, larger scheduler processes (one lease and one read of the election prefix per "
        "process per step), or a longer step"
    )
    utilisation = demand / 1e6 / fleet.cores
    return Resource("etcd CPU", 1, utilisation, load, change, utilisation)


# -- sizing helpers ---------------------------------------------------------------------------


def _units(given: int | None, demand_us: float, fleet: Fleet) -> int:
    """Given, or the fewest one-core units whose busiest one (ceil(P / N) of the P partitions)
    stays within `target`; at least 1 and at most one per partition (a partition lives on one
    shard and has one leader)."""
    if given is not None:
        return max(1, min(given, fleet.partitions))
    for units in range(1, fleet.partitions + 1):
        if demand_us * _busiest_share(fleet.partitions, units) / 1e6 <= fleet.target:
            return units
    return fleet.partitions


def _most(given: int | None, fleet: Fleet) -> int:
    return max(1, min(given, fleet.partitions)) if given is not None else fleet.partitions


def _busiest_share(partitions: int, units: int) -> float:
    return math.ceil(partitions / units) / partitions
