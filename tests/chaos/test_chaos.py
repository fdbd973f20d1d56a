"""The short chaos pass of `make test`: every scenario once, small, with a fresh seed printed
for replay (`python -m tests.chaos --scenario NAME --seed SEED`); any violation fails it.
The tiered scenarios run over the session's etcd cluster and Redis (about 20 s each)."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pytest

from tests.chaos.cluster import PrivateCluster
from tests.chaos.runner import FAKETIME, SCENARIOS, Run, Scenario
from tests.chaos.tiered import TIER_SCENARIOS, TieredRun, TierServices

# Eighteen scenarios each test retry delays for uniformity: at 0.0001 apiece, a correct system fails
# a CI run by chance about once in 550 (at 0.01 it would be once in six); a biased draw still shows
# a D several times the critical value (about 0.2 at the ~120 retries of a short run).
SHORT = {"jobs": 150, "fault_window": 6.0, "ks_alpha": 0.0001}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_keeps_the_contract(cluster: PrivateCluster, work_dir: Path, name: str) -> None:
    scenario = dataclasses.replace(SCENARIOS[name], **SHORT)  # type: ignore[arg-type]
    if scenario.skew and not FAKETIME.exists():
        reason = f"libfaketime is not installed ({FAKETIME}): apt-get install libfaketime"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
        pytest.skip(reason)
    seed = random.SystemRandom().randrange(2**32)
    print(f"chaos scenario {name}: seed {seed}")
    outcome = Run(cluster, scenario, seed, work_dir).execute()
    found = outcome.findings
    report = f"{name} seed {seed}: {outcome.injected}, {found.executions} executions"
    assert found.violations == [], f"{report}\n" + "\n".join(found.violations[:20])
    assert found.jobs == scenario.jobs + scenario.poison
    assert found.poison_dead == scenario.poison
    if scenario.faults:
        assert outcome.faults, f"{report}: no fault was injected"
    if scenario.skew:
        # The skew really was there: workers' clocks 5 minutes ahead of ours, or behind.
        assert outcome.clock_offsets
        assert all(abs(abs(offset) - 300) < 60 for offset in outcome.clock_offsets)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(TIER_SCENARIOS))
def test_tier_scenario_keeps_the_contract(
    cluster: PrivateCluster, tier_services: TierServices, work_dir: Path, name: str
) -> None:
    run_tiered_short(TieredRun, TIER_SCENARIOS[name], cluster, tier_services, work_dir)


def run_tiered_short(
    run: type[TieredRun],
    full: Scenario,
    cluster: PrivateCluster,
    tier_services: TierServices,
    work_dir: Path,
) -> None:
    """`full` once, small (SHORT), as a `run` over the tiered fleet: no violation, every job
    accounted for, a fault injected and something moved."""
    scenario = dataclasses.replace(full, **SHORT)  # type: ignore[arg-type]
    seed = random.SystemRandom().randrange(2**32)
    print(f"chaos scenario {scenario.name}: seed {seed}")
    outcome = run(cluster, scenario, seed, work_dir, tier_services).execute()
    print(outcome.summary())
    found = outcome.findings
    report = f"{scenario.name} seed {seed}: {outcome.injected}, {found.executions} executions"
    assert found.violations == [], f"{report}\n" + "\n".join(found.violations[:20])
    assert found.jobs == scenario.jobs + scenario.ancient
    assert outcome.faults, f"{report}: no fault was injected"
    assert found.tier is not None and found.tier.moves > 0, f"{report}: nothing was moved"
