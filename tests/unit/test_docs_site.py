"""The documentation site builds with `mkdocs build --strict`: a broken link, a missing anchor,
a page left out of the navigation or an API reference that does not resolve fails it, as it
fails `make docs`. Without mkdocs (the `docs` extra) it skips locally and fails under CI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs() -> Path:
    found = Path(sys.executable).parent / "mkdocs"
    if found.exists():
        return found
    on_path = shutil.which("mkdocs")
    if on_path is None:
        reason = "mkdocs is not installed (pip install -e '.[docs]')"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
        pytest.skip(reason)
    return Path(on_path)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(_mkdocs()),
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strictly_with_its_api_reference(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-5000:]
    assert "WARNING" not in built.stderr, built.stderr[-5000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    for name in ("chronoq.App", "chronoq.Task", "chronoq.Deferrer", "chronoq.JobContext"):
        assert f'id="{name}"' in reference, name
    assert 'id="chronoq.errors.JobLost"' in reference
    assert 'id="chronoq.observability.events.JobsEnqueued"' in reference


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strictness is real: the same site with one link to a missing anchor does not build."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "concepts.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the missing section](cli.md#no-such-section).\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config.write_text(
        text.replace("docs_dir: docs", f"docs_dir: {docs}").replace(
            "paths: [src]", f"paths: [{ROOT / 'src'}]"
        ),
        encoding="utf-8",
    )
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-section" in built.stderr
