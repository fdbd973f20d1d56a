"""Backoff: full jitter, delay = uniform(0, min(cap, base * 2**attempt))."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronoq.core.backoff import Backoff
from chronoq.errors import ConfigError


def test_window_doubles_per_attempt_until_the_cap() -> None:
    backoff = Backoff(base=2, cap=60)
    assert [backoff.window(n) for n in range(7)] == [2, 4, 8, 16, 32, 60, 60]


def test_window_of_a_negative_attempt_is_the_base() -> None:
    assert Backoff(base=3, cap=60).window(-5) == 3


@pytest.mark.parametrize("attempt", [63, 1000, 10**9])
def test_window_of_a_huge_attempt_is_the_cap_without_overflow(attempt: int) -> None:
    assert Backoff(base=1e300, cap=7200).window(attempt) == 7200


@given(
    base=st.floats(1e-3, 1e4),
    cap=st.floats(1e-3, 1e6),
    attempt=st.integers(-3, 200),
    seed=st.integers(0, 2**32),
)
def test_delay_stays_inside_the_window(base: float, cap: float, attempt: int, seed: int) -> None:
    backoff = Backoff(base=base, cap=cap)
    window = min(cap, base * 2.0 ** min(max(attempt, 0), 62))
    assert backoff.window(attempt) == pytest.approx(window)
    delay = backoff.delay(attempt, random.Random(seed))
    assert 0.0 <= delay <= backoff.window(attempt)


def test_delay_without_an_rng_uses_the_module_generator() -> None:
    assert 0.0 <= Backoff(base=1, cap=5).delay(2) <= 4


@pytest.mark.parametrize(
    ("base", "cap"),
    [
        (0, 10),
        (-1, 10),
        (1, 0),
        (1, -1),
        (math.nan, 10),
        (1, math.nan),
        (math.inf, 10),
        (1, math.inf),
    ],
)
def test_base_and_cap_must_be_positive_and_finite(base: float, cap: float) -> None:
    with pytest.raises(ConfigError, match="base and cap"):
        Backoff(base=base, cap=cap)


def _ks_statistic(samples: list[float]) -> float:
    """Kolmogorov-Smirnov distance between the samples (in [0, 1]) and uniform(0, 1)."""
    ordered = sorted(samples)
    n = len(ordered)
    return max(max((i + 1) / n - x, x - i / n) for i, x in enumerate(ordered))


@pytest.mark.parametrize(("attempt", "window"), [(0, 1.5), (3, 12.0), (20, 100.0)])
def test_delays_are_uniform_over_the_window(attempt: int, window: float) -> None:
    """Full jitter: a KS test against uniform(0, window) at the 0.1% level, fixed seed."""
    backoff = Backoff(base=1.5, cap=100)
    rng = random.Random(20240229)
    n = 4000
    samples = [backoff.delay(attempt, rng) / window for _ in range(n)]
    assert max(samples) <= 1.0
    critical = 1.949 / math.sqrt(n)  # alpha = 0.001
    assert _ks_statistic(samples) < critical
    # ... and the spread is the full window, not a narrow band inside it.
    assert min(samples) < 0.01
    assert max(samples) > 0.99


def test_the_ks_check_would_catch_a_skewed_jitter() -> None:
    rng = random.Random(7)
    skewed = [rng.random() ** 2 for _ in range(4000)]  # 'equal jitter'-like bias
    assert _ks_statistic(skewed) > 1.949 / math.sqrt(4000)
