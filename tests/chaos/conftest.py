"""The chaos suite's private PostgreSQL cluster, and the etcd cluster and Redis of its tiered
scenarios, one each per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.cluster import ClusterUnavailable, PrivateCluster
from tests.chaos.tiered import TierServices


@pytest.fixture(scope="session")
def cluster() -> Iterator[PrivateCluster]:
    try:
        created = PrivateCluster()
        created.create()
    except ClusterUnavailable as exc:
        reason = f"cannot run a private PostgreSQL cluster for the chaos suite: {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
        pytest.skip(reason)
    yield created
    created.destroy()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def tier_services() -> Iterator[TierServices]:
    try:
        created = TierServices()
        created.create()
    except ClusterUnavailable as exc:
        _unavailable(f"cannot run the tiered chaos scenarios: {exc}")
        raise AssertionError("unreachable") from exc  # _unavailable skips or fails
    yield created
    created.destroy()


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path
