"""`python -m build` makes an sdist and a wheel that carry everything chronoq reads at run time.

The build runs once per test run (module fixture, about 10 s) on a copy of the files git tracks:
the worktree's own `src/chronoq.egg-info` (left by the editable install) lists files in its
SOURCES.txt that setuptools would add to the sdist whatever pyproject.toml says. There
`python -m build --no-isolation` builds the sdist, then the wheel from that sdist, so a file the
sdist forgot is missing from the wheel too. `--no-isolation` builds with the project venv's
setuptools instead of downloading one.

The wheel is then installed with `pip --no-deps` into a fresh venv whose dependencies come from
the project venv, so nothing is downloaded:

    project .venv/site-packages  <- a .pth line in the fresh venv (dependencies only)
    fresh venv/site-packages     <- the wheel's chronoq, found first on sys.path

A plain `venv --system-site-packages` made from the project venv's interpreter would see the base
interpreter's packages, not the project venv's; and the project venv's editable chronoq stays out
of sight, because a path listed in a .pth file does not have its own .pth files run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "chronoq"


class Built(NamedTuple):
    wheel: Path
    sdist: Path


class Installed(NamedTuple):
    python: Path
    chronoq: Path


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _tracked_copy(destination: Path) -> Path:
    """The worktree as git sees it (tracked files, with their uncommitted changes)."""
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    source = _tracked_copy(tmp_path_factory.mktemp("source"))
    outdir = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", outdir, source, cwd=source)
    (wheel,) = outdir.glob("chronoq-*.whl")
    (sdist,) = outdir.glob("chronoq-*.tar.gz")
    return Built(wheel, sdist)


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    venv = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv)
    python = venv / "bin" / "python"
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=venv)
    Path(site.strip(), "project-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet"]
    _run(*pip, "--no-deps", "--no-index", built.wheel, cwd=venv)
    return Installed(python, venv / "bin" / "chronoq")


def _shipped_data_files() -> set[str]:
    """Every file of the package that is not Python, as a path inside the package."""
    return {
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    }


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH, so the worktree's sources cannot stand in for the installed package."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def test_the_wheel_holds_every_data_file(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
    assert _shipped_data_files() - names == set()


def test_the_sdist_holds_every_data_file(built: Built) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {f"src/{name}" for name in _shipped_data_files()} - names == set()


def test_the_installed_wheel_reads_its_sql_lua_templates_and_static(
    installed: Installed, tmp_path: Path
) -> None:
    check = Path(__file__).with_name("installed_check.py")
    where = _run(installed.python, check, cwd=tmp_path, env=_clean_env())
    assert Path(where.strip()).is_relative_to(installed.python.parents[1])


def test_the_installed_wheel_runs_the_demo(installed: Installed, tmp_path: Path) -> None:
    dsn = f"sqlite:///{tmp_path / 'demo.db'}"
    output = _run(
        installed.chronoq, "demo", "--jobs", "10", "--dsn", dsn, cwd=tmp_path, env=_clean_env()
    )
    assert "elapsed" in output
