"""The package layout's rules (docs/design.md, "Where things live"), checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import chronoq

SOURCE = Path(chronoq.__file__).parent
TIER_ONLY = ("redis", "etcd3gw")


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("client", TIER_ONLY)
def test_only_the_tier_imports_its_clients(client: str) -> None:
    outside = sorted(
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if "tier" not in path.relative_to(SOURCE).parts[:1]
        and any(m == client or m.startswith(f"{client}.") for m in _imported_modules(path))
    )
    assert outside == [], f"{client} imported outside chronoq/tier: {outside}"


def test_a_db_dispatch_process_loads_neither_redis_nor_etcd() -> None:
    script = (
        "import sys, chronoq, chronoq.cli.main, chronoq.http.api\n"
        "from chronoq.worker.worker import Worker\n"
        "from chronoq.scheduler.runner import Scheduler\n"
        "print(sorted(m for m in ('redis', 'etcd3gw') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_deprecated_watch_tier_still_adds_the_collector() -> None:
    from chronoq.observability.metrics import Metrics
    from chronoq.tier.metrics import TierCollector

    metrics = Metrics()
    with pytest.warns(DeprecationWarning, match=r"chronoq\.tier\.metrics\.watch"):
        collector = metrics.watch_tier(list)
    assert isinstance(collector, TierCollector)
    assert b"chronoq_tier_up 1.0" in metrics.render()
