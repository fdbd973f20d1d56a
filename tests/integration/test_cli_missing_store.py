"""Commands on a SQLite file that is not there: those that only look at a store (or change what it
already holds) say so in one line and create nothing; those that add to a store create it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chronoq.cli.main import NEEDS_EXISTING_STORE
from tests.integration.cli_support import run_cli

READERS = {
    "jobs list": ["jobs", "list"],
    "jobs show": ["jobs", "show", "1"],
    "jobs cancel": ["jobs", "cancel", "1"],
    "dead list": ["dead", "list"],
    "dead requeue": ["dead", "requeue", "--all"],
    "dead purge": ["dead", "purge", "--all"],
    "stats": ["stats"],
    "schedule list": ["schedule", "list"],
    "schedule show": ["schedule", "show", "nightly"],
    "schedule pause": ["schedule", "pause", "nightly"],
    "schedule resume": ["schedule", "resume", "nightly"],
    "schedule remove": ["schedule", "remove", "nightly"],
    "queue list": ["queue", "list"],
    "queue resume": ["queue", "resume", "emails"],
    "queue remove": ["queue", "remove", "emails"],
    "processes": ["processes"],
}


def test_every_command_that_needs_a_store_is_tested_here() -> None:
    assert set(READERS) == NEEDS_EXISTING_STORE


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_reader_on_a_missing_file_names_it_and_creates_nothing(
    command: str, tmp_path: Path
) -> None:
    missing = tmp_path / "typo.db"
    result = run_cli(*READERS[command], "--dsn", f"sqlite:///{missing}")
    assert (result.code, result.out) == (1, ""), result
    assert result.err == (
        f"error: no SQLite database at {missing}: check --dsn or CHRONOQ_DSN "
        "(`chronoq migrate` creates one)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_relative_path_is_shown_with_the_directory_it_was_looked_for_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHRONOQ_DSN", "sqlite:///typo.db")
    result = run_cli("jobs", "list")
    assert result.code == 1
    assert f"no SQLite database at typo.db ({tmp_path / 'typo.db'})" in result.err
    assert not (tmp_path / "typo.db").exists()


def test_a_usage_error_is_reported_before_the_missing_file(tmp_path: Path) -> None:
    result = run_cli("dead", "requeue", "--dsn", f"sqlite:///{tmp_path / 'typo.db'}")
    assert result.code == 2
    assert "give the ids of dead jobs to requeue, or --all" in result.err


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate"],
        ["enqueue", "ping", "--queue", "default"],
        ["schedule", "add", "nightly", "0 3 * * *", "--task", "cleanup", "--queue", "default"],
    ],
)
def test_a_command_that_adds_to_a_store_creates_it(argv: list[str], tmp_path: Path) -> None:
    created = tmp_path / "new.db"
    result = run_cli(*argv, "--dsn", f"sqlite:///{created}")
    assert result.code == 0, result
    assert created.exists()


def test_a_reader_on_an_existing_file_reads_it(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'there.db'}"
    assert run_cli("enqueue", "ping", "--queue", "default", "--dsn", dsn).code == 0
    listed = run_cli("jobs", "list", "--dsn", dsn, "--json")
    assert listed.code == 0
    assert [job["task"] for job in listed.json()] == ["ping"]
