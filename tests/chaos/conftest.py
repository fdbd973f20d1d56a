"""The chaos suite's private PostgreSQL cluster, one per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.cluster import ClusterUnavailable, PrivateCluster


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


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path
