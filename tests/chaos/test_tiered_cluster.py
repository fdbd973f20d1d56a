"""The short chaos pass over a tiered fleet on a Redis Cluster (tests.chaos.tiered_cluster):
each scenario once, small, with a fresh seed printed for replay (`python -m tests.chaos
--scenario NAME --seed SEED`); any violation fails it. About 30 s each, with the cluster's
start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.cluster import PrivateCluster
from tests.chaos.test_chaos import run_tiered_short
from tests.chaos.tiered import TierServices
from tests.chaos.tiered_cluster import CLUSTER_SCENARIOS, ClusterTieredRun


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(CLUSTER_SCENARIOS))
def test_cluster_scenario_keeps_the_contract(
    cluster: PrivateCluster, tier_services: TierServices, work_dir: Path, name: str
) -> None:
    run_tiered_short(ClusterTieredRun, CLUSTER_SCENARIOS[name], cluster, tier_services, work_dir)
