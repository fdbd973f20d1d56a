"""The short pass over the tier's regression scenarios (tests.chaos.tiered.REGRESSION_SCENARIOS)
that no other test runs against real servers: etcd replaced by a new cluster mid-run, its
revisions starting below the epochs Redis holds. Once, small, with a fresh seed printed for
replay (`python -m tests.chaos --scenario etcd-rebuilt --seed SEED`). `make chaos` runs them
all at full size."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.cluster import PrivateCluster
from tests.chaos.test_chaos import run_tiered_short
from tests.chaos.tiered import REGRESSION_SCENARIOS, TieredRun, TierServices


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_etcd_rebuilt_mid_run_stops_nothing(
    cluster: PrivateCluster, tier_services: TierServices, work_dir: Path
) -> None:
    scenario = REGRESSION_SCENARIOS["etcd-rebuilt"]
    run_tiered_short(TieredRun, scenario, cluster, tier_services, work_dir)
