"""The documentation site's examples, run as written (the README's are run by
test_readme_examples.py, with the same rules).

On the pages listed in PAGES, every ```python block runs, and every ```console block whose
fence follows `<!-- run -->`; a block is skipped only when the line before its fence is
`<!-- not run: reason -->`. A page's blocks run in order in one empty directory, against one
fresh SQLite store (`CHRONOQ_DSN`): a block that follows `<!-- file: NAME -->` is written to
NAME there, for later blocks to import (`from tasks import app`) and commands to name
(`--app tasks:app`); the others run, each in a subprocess of its own. Each page must run at
least one block.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_readme_examples import RUNNER, Block, _blocks, _clean_env, _commands

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The pages written as guides to follow: their examples are whole. The reference pages
# (cli.md, http.md, ...) show fragments of a larger program and are not listed.
PAGES = [
    "index.md",
    "quickstart.md",
    "guides/results.md",
    "guides/unique-jobs.md",
    "guides/rate-limits.md",
    "guides/exactly-once.md",
    "guides/rolling-deploys.md",
    "guides/migrating.md",
]
BASH = shutil.which("bash") or "/bin/bash"
_FILE = re.compile(r"^<!--\s*file:\s*([\w./-]+)\s*-->$")
_RUN = re.compile(r"^<!--\s*run\s*-->$")


def _marker(text: str, block: Block) -> str:
    """The non-blank line before the block's fence."""
    lines = text.splitlines()[: block.line - 1]
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _run(command: list[str], workdir: Path, where: str) -> str | None:
    done = subprocess.run(
        command,
        cwd=workdir,
        env=_clean_env(CHRONOQ_DSN=f"sqlite:///{workdir / 'chronoq.db'}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode == 0:
        return None
    return f"{where} exited {done.returncode}:\n{done.stdout[-1500:]}{done.stderr[-3000:]}"


def _run_page(page: str, workdir: Path) -> tuple[int, list[str]]:
    """Runs the page's blocks in order; returns how many ran and what went wrong."""
    text = (DOCS / page).read_text(encoding="utf-8")
    workdir.mkdir(parents=True)
    (workdir / "run_block.py").write_text(RUNNER, encoding="utf-8")
    ran, failures = 0, []
    for block in _blocks(text):
        marker, where = _marker(text, block), f"docs/{page}:{block.line}"
        if block.not_run is not None:
            continue
        if block.language == "python" and (file := _FILE.match(marker)):
            (workdir / file[1]).write_text(block.text, encoding="utf-8")
        elif block.language == "python":
            (workdir / "block.py").write_text(block.text, encoding="utf-8")
            failures.append(_run([sys.executable, "run_block.py", "block.py"], workdir, where))
        elif block.language == "console" and _RUN.match(marker):
            for command in _commands(block):
                failures.append(_run([BASH, "-ec", command], workdir, f"{where}: {command}"))
        else:
            continue
        ran += 1
    return ran, [failure for failure in failures if failure is not None]


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_examples_run(page: str, tmp_path: Path) -> None:
    ran, failures = _run_page(page, tmp_path / "page")
    assert ran, f"docs/{page} has no example that is run"
    assert not failures, "\n\n".join(failures)
