"""Figures by name, and merging a run of some of them into an earlier run's results.

A figure that is run alone (`--figures herd`) is merged into the committed `results.json`
(`--merge`), so the full suite's other figures stay as they were measured. The merged results
keep the separate run's date, duration, repeats and machine for each figure it replaced, and
RESULTS.md says so.
"""

from __future__ import annotations

import copy
from typing import Any

# Each figure's name on the command line, and the keys its rows take in results["figures"].
FIGURE_KEYS: dict[str, tuple[str, ...]] = {
    "drain": ("drain",),
    "bulk": ("bulk",),
    "latency": ("pickup", "lateness"),
    "backlog": ("backlog",),
    "efficiency": ("efficiency",),
    "herd": ("herd",),
    "poison": ("poison",),
    "tiered": ("tiered",),
    "enqueue": ("enqueue",),
    "steady": ("steady",),
}
FIGURE_TITLES = {
    "drain": "drain",
    "bulk": "bulk enqueue",
    "latency": "latency",
    "backlog": "backlog independence",
    "efficiency": "efficiency at saturation",
    "herd": "the 09:00 herd under a rate limit",
    "poison": "poison jobs beside ordinary work",
    "tiered": "tiered dispatch against db dispatch",
    "enqueue": "enqueue one by one",
    "steady": "lateness of a steady stream",
}
PROVENANCE = ("started_at", "duration_s", "smoke", "repeats", "machine")


def figure_label(figure: str) -> str:
    """ "figure 6 (the 09:00 herd under a rate limit)": numbered as README.md numbers them."""
    return f"figure {list(FIGURE_KEYS).index(figure) + 1} ({FIGURE_TITLES[figure]})"


class MergeError(Exception):
    """Two runs' results cannot be put together honestly; the message says why."""


def merge(base: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """`base` with every figure that `part` ran replaced by part's rows, and part's run
    recorded as that figure's separate run."""
    merged = copy.deepcopy(base)
    merged.pop("targets", None)  # recomputed from the merged figures when written
    _merge_systems(merged["systems"], part["systems"])
    provenance = {key: part[key] for key in PROVENANCE if key in part}
    separate = merged.setdefault("separate_runs", {})
    for figure in part["figures_run"]:
        run = dict(provenance)
        skipped = _skipped(base["figures"], figure)
        if skipped is not None:
            # The full run's time did not include this figure's measurement: its duration
            # adds to the suite's (tests/unit/test_docs.py).
            run["replaced_skipped"] = skipped
        for key in FIGURE_KEYS[figure]:
            if key in part["figures"]:
                merged["figures"][key] = copy.deepcopy(part["figures"][key])
            else:
                merged["figures"].pop(key, None)
        separate[figure] = run
    return merged


def _skipped(figures: dict[str, Any], figure: str) -> str | None:
    """Why the full run measured `figure` only in part (figure 8 without etcd), else None."""
    rows = [figures.get(key) for key in FIGURE_KEYS[figure]]
    reasons = [row["skipped"] for row in rows if isinstance(row, dict) and "skipped" in row]
    return reasons[0] if reasons else None


def _merge_systems(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Add the systems only the part measured. One system at two versions would make the
    systems table wrong for one of the runs: refuse it."""
    for name, system in theirs.items():
        known = ours.get(name)
        if known is None:
            ours[name] = copy.deepcopy(system)
        elif known["version"] != system["version"]:
            raise MergeError(
                f"{name} is {known['version']} in the results and {system['version']} in "
                "this run: run the whole suite again instead of merging"
            )
