"""`make chaos`: every scenario several times at full size, and the table of docs/reliability.md.

python -m tests.chaos                              # all scenarios, 3 runs each, writes the doc
python -m tests.chaos --scenario worker-sigkill --seed 1234 --jobs 150 --window 6
                                                   # replay one run (the seed a test printed)
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.chaos.checker import Findings
from tests.chaos.cluster import PrivateCluster
from tests.chaos.runner import REPO, SCENARIOS, Outcome
from tests.chaos.tiered import REGRESSION_SCENARIOS, TIER_SCENARIOS, TierServices, open_run
from tests.chaos.tiered_cluster import CLUSTER_SCENARIOS
from tests.chaos.tiertable import HEADER as TIER_HEADER
from tests.chaos.tiertable import tier_row

EVERY_SCENARIO = {**SCENARIOS, **TIER_SCENARIOS, **REGRESSION_SCENARIOS, **CLUSTER_SCENARIOS}
RUNS = 3
# Every run tests its retry delays for uniformity: at 0.01 apiece, a correct system would fail
# one of the 54 runs of a whole `make chaos` more often than not (1 - 0.99^54 = 42%). Each run
# gets its share of a 0.01 family-wise level instead (Bonferroni), whichever scenarios are run,
# so every row of the table is held to the same test: at ~800 retries a run, the critical D is
# 0.076 rather than 0.058, and a biased draw (no jitter, half jitter) shows a D of 0.5 or more.
FAMILY_ALPHA = 0.01
KS_ALPHA = FAMILY_ALPHA / (len(EVERY_SCENARIO) * RUNS)

DOC = REPO / "docs" / "reliability.md"
MARK = "<!-- the table below is written by `make chaos` -->"
TIER_HEADING = "### Over a tiered fleet"
DB_HEADER = (
    "| scenario | faults injected | runs | jobs | executions | lost | extra runs (all "
    "explained) | unexplained | stale writes refused / accepted | overlaps | kill → re-run, "
    "max (bound 5 s) | tick errors | retry KS D (max) | reproduce |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--scenario", choices=sorted(EVERY_SCENARIO), action="append")
    parser.add_argument("--seed", type=int, help="replay: the same faults at the same moments")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--window", type=float, default=30.0, help="seconds of fault injection")
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite the doc's table")
    parser.add_argument("--keep", type=Path, help="keep each run's logs and history under DIR")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    names = args.scenario or list(EVERY_SCENARIO)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    rng = random.SystemRandom()
    cluster = PrivateCluster()
    cluster.create()
    tier: TierServices | None = None
    outcomes: list[Outcome] = []
    try:
        if any(EVERY_SCENARIO[name].tiered for name in names):
            tier = TierServices()
            tier.create()
        for name in names:
            scenario = dataclasses.replace(
                EVERY_SCENARIO[name], jobs=args.jobs, fault_window=args.window, ks_alpha=KS_ALPHA
            )
            for _ in range(1 if args.seed is not None else args.runs):
                seed = args.seed if args.seed is not None else rng.randrange(2**32)
                with tempfile.TemporaryDirectory(prefix="chronoq-chaos-", dir=args.keep) as work:
                    run = open_run(cluster, scenario, seed, Path(work), tier)
                    outcome = run.execute()
                    if args.keep is not None:
                        shutil.copytree(work, args.keep / f"{name}-{seed}")
                outcomes.append(outcome)
                print(outcome.summary(), flush=True)
                for violation in outcome.findings.violations[:20]:
                    print(f"    {violation}", flush=True)
    finally:
        try:
            if tier is not None and args.keep is not None:
                keep = args.keep / "tier"
                shutil.copytree(
                    tier.root, keep, ignore=shutil.ignore_patterns("m?"), dirs_exist_ok=True
                )
        finally:
            # Whatever the copy did, no server of the run is left behind.
            if tier is not None:
                tier.destroy()
            cluster.destroy()
    if not args.no_doc and args.seed is None:
        _write_doc(outcomes, args)
    return 1 if any(o.findings.violations for o in outcomes) else 0


def _write_doc(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    """Rewrite the rows of the scenarios run, in both tables; the other rows stay as they were
    (a run of some scenarios does not erase the others' results)."""
    text = DOC.read_text(encoding="utf-8")
    head = text[: text.index(MARK) + len(MARK)] if MARK in text else text.rstrip() + "\n\n" + MARK
    old_db, _, old_tier = text[len(head) :].partition(TIER_HEADING)
    db = [o for o in outcomes if not o.scenario.tiered]
    tiered = [o for o in outcomes if o.scenario.tiered]
    tables = [
        _table(db, args, _old_table(old_db), DB_HEADER, _row),
        _table(tiered, args, _old_table(old_tier), TIER_HEADER, _tier_row),
    ]
    DOC.write_text(
        head + "\n\n" + tables[0] + "\n\n" + TIER_HEADING + "\n\n" + tables[1] + "\n",
        encoding="utf-8",
    )
    print(f"wrote {DOC}")


def _old_table(text: str) -> tuple[str, dict[str, str]]:
    """The caption and the rows by scenario of a table the doc holds."""
    lines = text.strip().splitlines()
    caption = next((line for line in lines if line.startswith("Run ")), "")
    rows = {}
    for line in lines:
        name = line.split("|")[1].strip() if line.startswith("| ") else ""
        if name in EVERY_SCENARIO:
            rows[name] = line
    return caption, rows


def _table(
    outcomes: list[Outcome],
    args: argparse.Namespace,
    old: tuple[str, dict[str, str]],
    header: str,
    row: Callable[[list[Outcome], argparse.Namespace], str],
) -> str:
    caption, rows = old
    if outcomes:
        earlier, caption = caption, _caption(args)
        if rows.keys() - {o.scenario.name for o in outcomes}:
            caption += f" Rows of scenarios not run then are from the run before: {earlier}"
    for name in dict.fromkeys(o.scenario.name for o in outcomes):
        rows[name] = row([o for o in outcomes if o.scenario.name == name], args)
    ordered = [rows[name] for name in EVERY_SCENARIO if name in rows]
    return "\n".join([caption, "", header, *ordered])


def _tier_row(group: list[Outcome], args: argparse.Namespace) -> str:
    injected: dict[str, int] = {}
    for outcome in group:
        for kind, count in outcome.injected.items():
            injected[kind] = injected.get(kind, 0) + count
    return tier_row(group, _faults(injected, group), _reproduce(group, args))


def _reproduce(group: list[Outcome], args: argparse.Namespace) -> str:
    seeds = ",".join(str(o.seed) for o in group)
    return (
        f"`python -m tests.chaos --scenario {group[0].scenario.name} --jobs {args.jobs} "
        f"--window {args.window:g} --seed S` (S in {seeds})"
    )


def _caption(args: argparse.Namespace) -> str:
    git = shutil.which("git") or "git"
    commit = subprocess.run(
        [git, "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [git, "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit += "+changes" if dirty else ""
    return (
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({platform.machine()}, Python {platform.python_version()}), commit {commit or '?'}: "
        f"{args.runs} run(s) per scenario, {args.jobs} jobs each, faults for {args.window:g} s; "
        f"retry delays tested at alpha {KS_ALPHA:.2g} a run ({FAMILY_ALPHA:g} over "
        f"{len(EVERY_SCENARIO) * RUNS} runs)."
    )


def _row(group: list[Outcome], args: argparse.Namespace) -> str:
    injected: dict[str, int] = {}
    for outcome in group:
        for kind, count in outcome.injected.items():
            injected[kind] = injected.get(kind, 0) + count
    found = [o.findings for o in group]
    recoveries = [r for f in found for r in f.recoveries]
    compound = [r for f in found for r in f.compound_recoveries]
    reproduce = _reproduce(group, args)
    return (
        "| "
        + " | ".join(
            [
                group[0].scenario.name,
                _faults(injected, group),
                str(len(group)),
                str(sum(f.jobs for f in found)),
                str(sum(f.executions for f in found)),
                str(sum(len(f.lost) for f in found)),
                str(sum(f.extra_explained for f in found)),
                str(sum(len(f.unexplained) for f in found)),
                _stale(found),
                str(sum(len(f.overlaps) for f in found)),
                _recovery(recoveries, compound),
                str(sum(len(f.ticks) for f in found)),
                _ks(found),
                reproduce,
            ]
        )
        + " |"
    )


def _faults(injected: dict[str, int], group: list[Outcome]) -> str:
    text = ", ".join(f"{kind} {count}x" for kind, count in sorted(injected.items())) or "none"
    poison = sum(o.scenario.poison for o in group)
    if poison:
        dead = sum(o.findings.poison_dead for o in group)
        text += f"; {poison} poison jobs, {dead} dead at exactly 3 attempts"
    return text


def _stale(found: list[Findings]) -> str:
    refused = sum(f.stale_refused for f in found)
    text = f"{refused} / {sum(len(f.stale_accepted) for f in found)}"
    heartbeats = sum(f.stale_heartbeats for f in found)
    return text + (f" ({heartbeats} heartbeats sent after a newer claim)" if heartbeats else "")


def _recovery(alone: list[float], compound: list[float]) -> str:
    text = f"{max(alone):.2f} s (n={len(alone)})" if alone else "-"
    if compound:
        text += f"; with a database outage {max(compound):.2f} s (n={len(compound)})"
    return text


def _ks(found: list[Findings]) -> str:
    values = [f.ks_statistic for f in found if f.ks_statistic]
    return f"{max(values):.3f}" if values else "-"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
