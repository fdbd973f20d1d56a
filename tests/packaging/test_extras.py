"""The core install does without `chronoq[server]`: every command but `serve` runs without it,
and `serve` says in one line which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_without_server(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.packaging.without_server", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_without_the_server_extra_names_it_in_one_line(tmp_path: Path) -> None:
    result = run_without_server("serve", "--dsn", f"sqlite:///{tmp_path / 'q.db'}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "chronoq serve needs the server extra: pip install 'chronoq[server]'" in result.stderr


def test_the_core_commands_run_without_the_server_extra(tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'q.db'}"
    for args in (
        ["demo", "--jobs", "10", "--dsn", dsn],
        ["stats", "--dsn", dsn],
        ["jobs", "list", "--dsn", dsn],
        ["enqueue", "anything", "--queue", "default", "--dsn", dsn],
        ["schedule", "preview", "0 9 * * *", "--count", "1"],
        ["--help"],
    ):
        result = run_without_server(*args, cwd=tmp_path)
        assert result.returncode == 0, (args, result.stderr)
