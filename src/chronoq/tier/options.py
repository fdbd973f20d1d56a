"""The settings of a partition leader (`TierOptions.from_config` reads them off the app's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chronoq.config import Config


@dataclass(frozen=True, slots=True)
class TierOptions:
    partitions: int = 16
    horizon: float = 60.0
    # A full pass over the horizon: picks up retries, rescues, requeues and resumed queues.
    stage_interval: float = 1.0
    step_interval: float = 0.5
    # Rows a staging read returns. A pass pages through the horizon in id order, and each page
    # sorts every candidate left to find its first rows: the pages of one pass cost about the
    # candidates squared over the page. Beside 10M pending jobs, with some 22,000 due in the
    # horizon or overdue, a pass took 1,423 ms of PostgreSQL CPU at 1,000 rows a read and
    # 135 ms at 20,000 (bench/stage_pending.md).
    stage_batch: int = 20_000
    move_batch: int = 1000
    restage_after: float = 30.0
    trim_interval: float = 10.0
    tick: float = 0.005
    # The coordination lease's time to live: how long a partition may stay unconfirmed, and
    # how long Redis must refuse an epoch the elector still grants before it is overridden.
    lease_ttl: float = 5.0
    # Full move batches one turn of the mover may run for a partition before it yields to
    # the others and to its trust window: 10 of 1,000 keep a turn near 50 ms of Redis.
    move_batches_per_turn: int = 10

    @classmethod
    def from_config(cls, config: Config, partitions: int) -> TierOptions:
        return cls(
            partitions=partitions,
            horizon=config.stage_horizon,
            step_interval=min(0.5, config.leader_ttl / 10),
            lease_ttl=config.leader_ttl,
        )
