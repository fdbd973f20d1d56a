"""The short chaos pass over a tiered fleet on a Redis Cluster (tests.chaos.tiered_cluster):
each scenario once, small, with a fresh seed printed for replay (`python -m tests.chaos
--scenario NAME --seed SEED`); any violation fails it. About 30 s each, with the cluster's
start."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from tests.chaos.cluster import PrivateCluster
from tests.chaos.test_chaos import SHORT
from tests.chaos.tiered import TierServices
from tests.chaos.tiered_cluster import CLUSTER_SCENARIOS, ClusterTieredRun


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(CLUSTER_SCENARIOS))
def test_cluster_scenario_keeps_the_contract(
    cluster: PrivateCluster, tier_services: TierServices, work_dir: Path, name: str
) -> None:
    scenario = dataclasses.replace(CLUSTER_SCENARIOS[name], **SHORT)  # type: ignore[arg-type]
    seed = random.SystemRandom().randrange(2**32)
    print(f"chaos scenario {name}: seed {seed}")
    outcome = ClusterTieredRun(cluster, scenario, seed, work_dir, tier_services).execute()
    print(outcome.summary())
    found = outcome.findings
    report = f"{name} seed {seed}: {outcome.injected}, {found.executions} executions"
    assert found.violations == [], f"{report}\n" + "\n".join(found.violations[:20])
    assert found.jobs == scenario.jobs
    assert outcome.faults, f"{report}: no fault was injected"
    assert found.tier is not None and found.tier.moves > 0, f"{report}: nothing was moved"
