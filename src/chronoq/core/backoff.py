"""Retry delays: exponential backoff with full jitter.

`delay = uniform(0, min(cap, base * 2**attempt))` where `attempt` counts the attempts made so far
(1 after the first failure). Full jitter spreads a burst of failures evenly over the window, which
keeps retries of many jobs that failed together from hammering a recovering dependency together.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from chronoq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Backoff:
    """Full-jitter exponential backoff: `base` and `cap` in seconds."""

    base: float = 2.0
    cap: float = 3600.0

    def __post_init__(self) -> None:
        # Finite too: an infinite cap makes delays no clock can add to a timestamp.
        if not all(0 < value < math.inf for value in (self.base, self.cap)):
            raise ConfigError(
                "Backoff base and cap must be positive, finite seconds, "
                f"got {self.base}, {self.cap}"
            )

    def window(self, attempt: int) -> float:
        """Upper bound of the delay after `attempt` attempts."""
        exponent = min(max(attempt, 0), 62)  # 2**62 already dwarfs any cap
        return float(min(self.cap, self.base * 2.0**exponent))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A delay drawn uniformly from [0, window(attempt)]."""
        return (rng or random).uniform(0.0, self.window(attempt))
