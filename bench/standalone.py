"""What the benchmarks run outside `make bench` share (`bench.instructions`,
`bench.schema_cost`, `bench.claim_head`): the server they may create databases on, a scratch
database with chronoq's schema, the settings a report names, and the report written beside
them."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import recreate_database, with_database
from bench.machine import describe

REDIS_DEFAULT = "redis://127.0.0.1:6379/14"


def admin_dsn() -> str:
    """A PostgreSQL DSN allowed to create databases (env CHRONOQ_BENCH_DSN)."""
    return os.environ.get("CHRONOQ_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def migrated_database(admin: str, database: str) -> str:
    """`database` dropped, made again and migrated to chronoq's schema; its DSN."""
    from chronoq import App

    recreate_database(admin, database)
    dsn = with_database(admin, database)
    app = App(dsn, pool_size=1)
    try:
        app.migrate()
    finally:
        app.close()
    return dsn


def run_settings(admin: str, **settings: Any) -> dict[str, Any]:
    """`settings` with the machine, the date and the commit a report names."""
    described = describe(admin, os.environ.get("CHRONOQ_BENCH_REDIS", REDIS_DEFAULT))
    return settings | {
        "machine": f"{described['cpu']}, {described['cores']} cores, {described['postgres']}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": described["chronoq_commit"],
    }


def write_report(out: Path | None, stem: str, text: str, results: dict[str, Any]) -> None:
    """`stem.md` and `stem.json` into `out` (nowhere when None)."""
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text, encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
