"""The drain and bulk figures measure every system once per repeat, in one pass, so that a slow
spell of a shared machine falls on all of them alike: the order of the runs, recorded in place
of the measurements (no database is touched)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench.harness import Drain, Settings

from bench import harness


def settings(tmp_path: Path, systems: tuple[str, ...]) -> Settings:
    return Settings.tiny(
        systems=systems,
        repeats=2,
        admin_dsn="postgresql://unused",
        redis_url="redis://unused",
        work_dir=tmp_path,
        log=lambda line: None,
    )


def test_each_repeat_of_the_drain_is_one_pass_with_each_layouts_systems_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[tuple[str, str]] = []
    rates = iter(range(1, 1_000))

    def drain_once(settings: Settings, name: str, config: Any, jobs: int) -> Drain:
        runs.append((name, config.label))
        return Drain(float(next(rates)), 1.0, 1.0)

    monkeypatch.setattr(harness, "drain_once", drain_once)
    names = ("chronoq", "chronoq-sqlite", "bare-sql")
    rows = harness.figure_drain(settings(tmp_path, names), names)

    layouts = [(row["system"], row["label"]) for row in rows]
    first, second = runs[: len(layouts)], runs[len(layouts) :]
    assert first == second, "every repeat runs the same pass"
    assert sorted(first) == sorted(layouts), "a pass runs each system's layouts once"
    keyed = [(row["config"]["processes"], row["config"]["batch"]) for row in rows]
    by_layout = [keyed[layouts.index(run)] for run in first]
    assert by_layout == sorted(by_layout), "one layout's systems run back to back"
    # The rows keep the report's order (system by system) and each gathers its own two runs.
    assert [row["system"] for row in rows] == sorted(
        (row["system"] for row in rows), key=names.index
    )
    for row in rows:
        position = first.index((row["system"], row["label"])) + 1
        assert row["jobs_per_s"]["runs"] == [position, position + len(layouts)]


def test_each_repeat_of_the_bulk_figure_enqueues_with_every_system_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []

    class Recorded:
        def __init__(self, name: str) -> None:
            self.name = name

        def enqueue_noop(self, count: int) -> None:
            runs.append(self.name)

        def close(self) -> None:
            pass

    monkeypatch.setattr(harness, "fresh_environment", lambda settings: None)
    monkeypatch.setattr(harness, "settle", lambda target: None)
    monkeypatch.setattr(harness, "open_system", lambda name, target: Recorded(name))
    names = ("chronoq", "chronoq-sqlite", "bare-sql")
    rows = harness.figure_bulk(settings(tmp_path, names), names)

    assert runs == [*names, *names]
    assert [row["system"] for row in rows] == list(names)
    assert all(len(row["jobs_per_s"]["runs"]) == 2 for row in rows)
