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


def test_the_old_fleetview_module_still_imports_and_warns() -> None:
    import importlib
    import sys

    from chronoq.fleet import view

    sys.modules.pop("chronoq.fleetview", None)
    with pytest.warns(DeprecationWarning, match=r"chronoq\.fleet\.view"):
        old = importlib.import_module("chronoq.fleetview")
    assert old.fleet_json is view.fleet_json


def test_no_import_cycles_among_modules() -> None:
    """Module-level imports (those under TYPE_CHECKING included) form no cycle: each module can
    be read, and imported, after what it imports."""
    known = _modules()
    graph = {name: _chronoq_imports(path, name, known) for name, path in known.items()}
    assert _cycles(graph) == []


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in SOURCE.rglob("*.py"):
        parts = ("chronoq", *path.relative_to(SOURCE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _chronoq_imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The chronoq modules `path` imports outside functions, less its own packages and their
    children (a package's __init__ may re-export its modules)."""
    targets: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        for child in [node, *ast.walk(node)] if isinstance(node, ast.If) else [node]:
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for alias in child.names:
                    full = f"{child.module}.{alias.name}"
                    targets.add(full if full in known else child.module)
            elif isinstance(child, ast.Import):
                targets.update(alias.name for alias in child.names)
    return {
        t
        for t in targets & known.keys()
        if t != name and not name.startswith(t + ".") and not t.startswith(name + ".")
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                found.append(sorted([node, *component]))

    for node in graph:
        if node not in index:
            visit(node)
    return found
