"""One module per measured system; `load(name)` returns its System class."""

from __future__ import annotations

import importlib

from bench.systems.base import System

MODULES = {
    "chronoq": "bench.systems.chronoq_pg",
    "chronoq-sqlite": "bench.systems.chronoq_sqlite",
    "bare-sql": "bench.systems.bare_sql",
    "bare-sqlite": "bench.systems.bare_sqlite",
    "pgqueuer": "bench.systems.pgqueuer_peer",
    "procrastinate": "bench.systems.procrastinate_peer",
    "saq": "bench.systems.saq_peer",
}


def load(name: str) -> type[System]:
    if name not in MODULES:
        raise SystemExit(f"unknown system {name!r}; known: {', '.join(MODULES)}")
    module = importlib.import_module(MODULES[name])
    system: type[System] = module.SYSTEM
    return system
