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
    stage_batch: int = 1000
    move_batch: int = 1000
    restage_after: float = 30.0
    trim_interval: float = 10.0
    tick: float = 0.005

    @classmethod
    def from_config(cls, config: Config, partitions: int) -> TierOptions:
        return cls(
            partitions=partitions,
            horizon=config.stage_horizon,
            step_interval=min(0.5, config.leader_ttl / 10),
        )
