"""The short pass over the tier's regression scenarios (tests.chaos.tiered.REGRESSION_SCENARIOS)
that no other test runs against real servers: etcd replaced by a new cluster mid-run, its
revisions starting below the epochs Redis holds. Once, small, with a fresh seed printed for
replay (`python -m tests.chaos --scenario etcd-rebuilt --seed SEED`). `make chaos` runs them
all at full size."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from tests.chaos.cluster import PrivateCluster
from tests.chaos.test_chaos import SHORT
from tests.chaos.tiered import REGRESSION_SCENARIOS, TieredRun, TierServices


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_etcd_rebuilt_mid_run_stops_nothing(
    cluster: PrivateCluster, tier_services: TierServices, work_dir: Path
) -> None:
    scenario = dataclasses.replace(REGRESSION_SCENARIOS["etcd-rebuilt"], **SHORT)  # type: ignore[arg-type]
    seed = random.SystemRandom().randrange(2**32)
    print(f"chaos scenario etcd-rebuilt: seed {seed}")
    outcome = TieredRun(cluster, scenario, seed, work_dir, tier_services).execute()
    print(outcome.summary())
    found = outcome.findings
    report = f"etcd-rebuilt seed {seed}: {outcome.injected}, {found.executions} executions"
    assert found.violations == [], f"{report}\n" + "\n".join(found.violations[:20])
    assert found.jobs == scenario.jobs
    assert outcome.faults, f"{report}: etcd was not rebuilt"
