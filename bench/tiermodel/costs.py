"""The per-operation costs the sizing model replays: what each resource spends per timer, per
job, per row or per request, with where each figure came from.

CPU figures are µs of the resource's own CPU (a PostgreSQL backend, the Redis main thread, an
etcd member, a scheduler's Python process), not the caller's wall time, so they add up to cores.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


class CostsError(Exception):
    """A costs file that cannot be read as costs: the message names the field."""


@dataclass(frozen=True)
class Costs:
    # PostgreSQL, backend CPU in µs per job (batches as the tier sends them)
    pg_insert_us: float  # enqueue: job_insert_many, 1,000 a call
    pg_claim_us: float  # confirm: job_claim_ids (claim by id + token), 100 a call
    pg_finish_us: float  # complete: job_finish_many, 100 a call
    pg_stage_row_us: float  # the stager's horizon query, per row returned (1,000 a page)
    pg_row_bytes: float  # table and indexes per pending job
    pg_wal_bytes_per_job: float  # WAL written by insert + claim + finish of one job
    # Redis main-thread CPU in µs
    redis_stage_us: float  # per timer staged (stage.lua, 1,000 a call)
    redis_move_us: dict[str, float]  # per timer moved, by move.lua batch limit ("1", "100", ...)
    redis_consume_us: float  # per entry read and acked (XREADGROUP COUNT 100 + XACK)
    redis_bytes_per_timer: float  # sorted-set member, staged
    # a scheduler process (one Python interpreter: one core at most), CPU in µs
    sched_wheel_us: float  # per timer: wheel insert + expire
    sched_stage_row_us: float  # per horizon row read (the query's client side)
    sched_redis_us: float  # per timer: the client side of staging and moving it
    sched_bytes_per_timer: float  # the wheel's memory per timer held
    # etcd member CPU in µs per request
    etcd_keepalive_us: float
    etcd_range_us: float  # a range read of the election prefix
    etcd_range_keys: int  # the keys that range read returned
    # how each figure was obtained: "measured", "measured (wall)", "assumed: <why>"
    sources: dict[str, str] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)

    def move_us(self, batch: int) -> float:
        """Redis CPU per timer at this batch limit: the nearest measured batch at or below it
        (a bigger batch is never cheaper per timer than the model assumes)."""
        measured = sorted(int(b) for b in self.redis_move_us)
        at_or_below = [b for b in measured if b <= batch] or measured[:1]
        return self.redis_move_us[str(at_or_below[-1])]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Costs:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CostsError(f"unknown cost field(s): {', '.join(unknown)}")
        missing = sorted(
            f.name
            for f in fields(cls)
            if f.name not in data and f.name not in ("sources", "machine")
        )
        if missing:
            raise CostsError(f"missing cost field(s): {', '.join(missing)}")
        if not data["redis_move_us"]:
            raise CostsError("redis_move_us needs at least one batch size")
        return cls(**data)

    @classmethod
    def load(cls, path: Path) -> Costs:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CostsError(f"cannot read {path}: {exc}") from exc
        return cls.from_json(data)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")


def median_costs(runs: Sequence[Costs]) -> Costs:
    """Each figure's median over several measurements (sources and machine of the first)."""
    if not runs:
        raise CostsError("no measurement to take the median of")
    first = runs[0].to_json()
    merged: dict[str, Any] = {}
    for name, value in first.items():
        if name in ("sources", "machine") or isinstance(value, int):
            merged[name] = value
        elif isinstance(value, dict):
            merged[name] = {
                key: round(statistics.median(r.to_json()[name][key] for r in runs), 3)
                for key in value
            }
        else:
            merged[name] = round(statistics.median(r.to_json()[name] for r in runs), 3)
    merged["sources"] = {
        key: f"{source}, median of {len(runs)}" if len(runs) > 1 else source
        for key, source in first["sources"].items()
    }
    return Costs.from_json(merged)
