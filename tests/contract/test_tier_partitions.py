"""Contract: the partition count of tiered dispatch, fixed by the first call on a database."""

from __future__ import annotations

import pytest

from chronoq.errors import ConfigError

from .support import Store, run_together


def test_the_partition_count_is_fixed_by_the_first_call(store: Store) -> None:
    assert store.tier_partitions(16) == 16
    assert store.tier_partitions(8) == 16
    assert store.tier_partitions(16) == 16


@pytest.mark.parametrize("requested", [0, -3, 1025, True])
def test_an_impossible_partition_count_is_refused_and_not_recorded(
    store: Store, requested: int
) -> None:
    with pytest.raises(ConfigError, match="partition count must be from 1 to 1024"):
        store.tier_partitions(requested)
    assert store.tier_partitions(1024) == 1024


def test_concurrent_first_calls_agree(store: Store) -> None:
    counts = run_together(store, 4, lambda own, n: own.tier_partitions(4 * (n + 1)))
    assert len(set(counts)) == 1
    assert counts[0] in (4, 8, 12, 16)
    assert store.tier_partitions(1) == counts[0]
