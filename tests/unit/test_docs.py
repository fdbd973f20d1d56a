"""What the docs say that can be checked against the code or the committed results.

The docs' lists of job statuses name every status of `JobStatus`: a list that starts at
`pending` and names three statuses or more stands for all of them (as `--status` takes, or
`status` may be); shorter lists, and those naming only the statuses a job ends in, are what
their sentence says and are left alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chronoq.core.jobs import JobStatus

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_NAME = "(?:" + "|".join(status.value for status in JobStatus) + ")"
# Status names, each maybe in backticks, joined by commas, "or" or "and", across line breaks.
_LIST = re.compile(rf"`?{_NAME}`?(?:(?:,\s*(?:or\s+|and\s+)?|\s+(?:or|and)\s+)`?{_NAME}`?)+")


def _lists_of_every_status(text: str) -> list[tuple[int, list[str]]]:
    found = []
    for match in _LIST.finditer(text):
        names = re.findall(_NAME, match.group())
        if names[0] == JobStatus.PENDING and len(names) >= 3:
            found.append((text.count("\n", 0, match.start()) + 1, names))
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_list_of_all_statuses_names_each_one(document: Path) -> None:
    every = [status.value for status in JobStatus]
    for line, names in _lists_of_every_status(document.read_text(encoding="utf-8")):
        assert sorted(names) == sorted(every), f"{document.name}:{line} lists {names}"


def test_the_docs_have_lists_of_every_status() -> None:
    """The pattern still finds the lists it guards (docs/cli.md has two)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert len(_lists_of_every_status(text)) >= 2


def test_every_doc_gives_the_same_duration_for_make_bench_and_it_matches_the_results() -> None:
    """`make bench` runs every figure; the committed results hold the full run's duration. A
    figure merged in from a run of its own counts only if the full run did not measure it, or
    skipped its measurement (figure 8 without etcd; a figure run again replaces rows the full
    run's time already includes), and a run that measured several figures counts once."""
    results = json.loads((ROOT / "bench" / "results.json").read_text(encoding="utf-8"))
    measured = set(results["figures_run"])
    missing_runs = {
        run["started_at"]: run["duration_s"]
        for figure, run in results.get("separate_runs", {}).items()
        if figure not in measured or "replaced_skipped" in run
    }
    seconds = results["duration_s"] + sum(missing_runs.values())
    stated = {
        path: re.findall(r"about (\d+) minutes", (ROOT / path).read_text(encoding="utf-8"))
        for path in ("Makefile", "README.md", "bench/README.md")
    }
    assert all(len(minutes) == 1 for minutes in stated.values()), stated
    assert {minutes[0] for minutes in stated.values()} == {str(round(seconds / 60))}, stated
