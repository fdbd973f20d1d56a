"""Run inside the venv the wheel was installed into: prints where chronoq was imported from, and
reads every kind of file the package ships that is not Python (SQL, Lua, templates, static)."""

from __future__ import annotations

from importlib import resources

import chronoq
from chronoq.storage.sqlfile import load_dialect, load_migrations
from chronoq.tier.redis.scripts import lua_source


def main() -> None:
    print(chronoq.__file__)
    for dialect in ("chronoq.storage.sqlite", "chronoq.storage.postgres"):
        assert load_dialect(dialect) and load_migrations(dialect), dialect
    for script in ("stage", "move", "fence", "trim", "take_over", "waiting", "waits"):
        assert lua_source(script).strip(), script
    http = resources.files("chronoq.http")
    assert http.joinpath("templates").joinpath("base.html").read_text(encoding="utf-8")
    assert http.joinpath("static").joinpath("dashboard.js").read_text(encoding="utf-8")


if __name__ == "__main__":
    main()
