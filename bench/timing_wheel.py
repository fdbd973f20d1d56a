"""`python -m bench.timing_wheel`: the timing wheel against heapq, in µs per operation.

A partition leader holds its partition's next timers in memory and wakes when the next one falls
due. This measures what that costs with chronoq's `TimingWheel` and with the obvious other
choice, a `heapq` of (deadline, seq, key) that cancels by lazy deletion (a cancelled entry stays
in the heap until it reaches the top). For each case, on the same timers:

```
 insert   add every timer (keys (job_id, token), deadlines uniform over the horizon)
 cancel   cancel 30% of them, picked at random
 expire   wake at next_deadline(), expire there, until nothing is left: the time of the whole
          loop divided by the timers that fired (a heap wakes at each distinct deadline, the
          wheel once a tick: its 5 ms tick is the batch window)
```

Time is simulated: `expire` is given each next deadline, nothing sleeps, so the figures are the
CPU cost of the structure alone. The same timers at 10k, 100k and 1M over 60 s show how each
cost grows with the number held; 1M over 24 h and 100k due at one instant are the extremes of
spread.

Memory is measured in a run of its own (tracemalloc slows every allocation, so never while
timing): the bytes the structure allocated for its timers once all are added, and what it still
holds after the cancels, both per timer added. A heap keeps a cancelled entry until it reaches
the top, a wheel frees it at once. They are this process's CPU time per operation (wall time is
kept in the JSON), with the garbage collector off while timing, as `timeit` does. Every run is
checked before it counts: both structures fire exactly the timers left after the cancels, none
before its deadline, the wheel at most a tick after it.

A full run writes `timing_wheel.json` and `timing_wheel.md` beside this module, where the
suite keeps its results (`--out DIR` elsewhere). `--smoke` runs every case with a hundredth of its
timers, once, and writes only where `--out` says: it proves the harness works, and its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import platform
import random
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.stats import summary
from chronoq.tier.wheel import TimingWheel

Key = tuple[int, int]  # (job_id, token), as a partition leader keys its timers
START = 1_000.0  # the simulated monotonic clock at the start of each run, seconds
ONE_INSTANT_AHEAD = 10.0  # "due at one instant": every timer due this long after the start
SEED = 1
CANCELLED = 0.3
# What the wheel should reach for 1M timers over 60 s on a 2-core machine (CPython).
TARGETS = {"insert_us": 4.0, "expire_us": 3.0}
TARGET_CASE = "1M over 60 s"


@dataclass(frozen=True)
class Case:
    timers: int
    horizon: float  # seconds the deadlines spread over from the start; 0: all at one instant
    span: str  # the horizon as people say it

    @property
    def name(self) -> str:
        if self.timers >= 10**6:
            count = f"{self.timers // 10**6}M"
        elif self.timers >= 1000:
            count = f"{self.timers // 1000}k"
        else:
            count = str(self.timers)
        return f"{count} {self.span}"


FULL_CASES = (
    Case(10_000, 60.0, "over 60 s"),
    Case(100_000, 60.0, "over 60 s"),
    Case(1_000_000, 60.0, "over 60 s"),  # TARGET_CASE
    Case(1_000_000, 86_400.0, "over 24 h"),
    Case(100_000, 0.0, "due at one instant"),
)
SMOKE_SHARE = 100  # a smoke run holds this share of each case's timers, at least 100


class BenchCheckFailed(Exception):
    """A structure fired the wrong timers, or fired one early: its figures would be of a bug."""


class Timers(Protocol):
    def add(self, key: Key, deadline: float) -> None: ...
    def cancel(self, key: Key) -> bool: ...
    def expire(self, now: float | None = None) -> list[Key]: ...
    def next_deadline(self) -> float | None: ...


class HeapTimers:
    """The reference: a heap of (deadline, seq, key); cancel and re-add leave stale entries
    that are dropped when they reach the top."""

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Key]] = []
        self._live: dict[Key, int] = {}
        self._seq = 0

    def add(self, key: Key, deadline: float) -> None:
        self._seq += 1
        self._live[key] = self._seq
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def cancel(self, key: Key) -> bool:
        return self._live.pop(key, None) is not None

    def next_deadline(self) -> float | None:
        heap, live = self._heap, self._live
        while heap and live.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def expire(self, now: float | None = None) -> list[Key]:
        if now is None:
            raise ValueError("the heap reference is driven by explicit times only")
        heap, live, fired = self._heap, self._live, []
        while heap and heap[0][0] <= now:
            _, seq, key = heapq.heappop(heap)
            if live.get(key) == seq:
                del live[key]
                fired.append(key)
        return fired


STRUCTURES: dict[str, Callable[[], Timers]] = {
    "wheel": lambda: TimingWheel(clock=lambda: START),
    "heapq": HeapTimers,
}


# -- one run ----------------------------------------------------------------------------------


@dataclass
class Inputs:
    """The same timers and cancels for every structure in a run."""

    deadlines: list[tuple[Key, float]]
    cancels: list[Key]

    @classmethod
    def draw(cls, case: Case, seed: int) -> Inputs:
        rng = random.Random(seed)
        keys = [(job_id, 1) for job_id in range(1, case.timers + 1)]
        if case.horizon:
            deadlines = [(key, START + rng.uniform(0.0, case.horizon)) for key in keys]
        else:
            deadlines = [(key, START + ONE_INSTANT_AHEAD) for key in keys]
        return cls(deadlines, rng.sample(keys, round(case.timers * CANCELLED)))


@dataclass
class Phase:
    cpu_s: float
    wall_s: float
    operations: int

    def us(self, clock: str = "cpu") -> float:
        seconds = self.cpu_s if clock == "cpu" else self.wall_s
        return seconds * 1e6 / max(self.operations, 1)


@dataclass
class Run:
    insert: Phase
    cancel: Phase
    expire: Phase
    wakes: int
    max_lateness_s: float


@contextmanager
def measured(phase: dict[str, float]) -> Iterator[None]:
    """CPU and wall seconds of the block, with the collector off (and its debt paid before)."""
    gc.collect()
    gc.disable()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        yield
    finally:
        phase["cpu_s"] = time.process_time() - cpu
        phase["wall_s"] = time.perf_counter() - wall
        gc.enable()


def run_once(structure: str, inputs: Inputs) -> Run:
    timers = STRUCTURES[structure]()
    add, cancel = timers.add, timers.cancel
    insert: dict[str, float] = {}
    with measured(insert):
        for key, deadline in inputs.deadlines:
            add(key, deadline)
    cancelled: dict[str, float] = {}
    with measured(cancelled):
        for key in inputs.cancels:
            cancel(key)
    expired: dict[str, float] = {}
    with measured(expired):
        wakes = drain(timers)
    fired = sum(len(keys) for _, keys in wakes)
    return Run(
        insert=Phase(**insert, operations=len(inputs.deadlines)),
        cancel=Phase(**cancelled, operations=len(inputs.cancels)),
        expire=Phase(**expired, operations=fired),
        wakes=len(wakes),
        max_lateness_s=check(structure, inputs, wakes),
    )


@dataclass
class Memory:
    added_bytes: int  # held once every timer is added
    after_cancel_bytes: int  # still held after the cancels
    timers: int

    def per_timer(self) -> dict[str, float]:
        return {
            "added": round(self.added_bytes / self.timers, 1),
            "after_cancel": round(self.after_cancel_bytes / self.timers, 1),
        }


def memory_once(structure: str, inputs: Inputs) -> Memory:
    """What the structure allocates for the timers (the keys and deadlines are the inputs',
    allocated before tracing starts), traced after the adds and after the cancels."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        timers = STRUCTURES[structure]()
        for key, deadline in inputs.deadlines:
            timers.add(key, deadline)
        added = tracemalloc.get_traced_memory()[0] - base
        for key in inputs.cancels:
            timers.cancel(key)
        gc.collect()
        after_cancel = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del timers
    return Memory(added, after_cancel, len(inputs.deadlines))


def drain(timers: Timers) -> list[tuple[float, list[Key]]]:
    """What a leader does: wake at the next deadline, take what is due, until none is left."""
    wakes = []
    next_deadline, expire = timers.next_deadline, timers.expire
    while (due := next_deadline()) is not None:
        wakes.append((due, expire(due)))
    return wakes


def check(structure: str, inputs: Inputs, wakes: Sequence[tuple[float, list[Key]]]) -> float:
    """The run fired exactly the timers left, each once and none early; returns the worst
    lateness (a wheel's is at most a tick)."""
    deadline_of = dict(inputs.deadlines)
    for key in inputs.cancels:
        del deadline_of[key]
    fired = [(now, key) for now, keys in wakes for key in keys]
    if len(fired) != len(deadline_of) or {key for _, key in fired} != set(deadline_of):
        raise BenchCheckFailed(
            f"{structure} fired {len(fired)} timers, {len({k for _, k in fired})} distinct, "
            f"of the {len(deadline_of)} left after the cancels"
        )
    early = [(now, key) for now, key in fired if deadline_of[key] > now]
    if early:
        raise BenchCheckFailed(f"{structure} fired {len(early)} timers early, e.g. {early[0]}")
    lateness = max((now - deadline_of[key] for now, key in fired), default=0.0)
    if structure == "wheel" and lateness > 0.005 + 1e-9:
        raise BenchCheckFailed(f"the wheel fired a timer {lateness * 1e3:.3f} ms late")
    return lateness


# -- the suite --------------------------------------------------------------------------------


@dataclass
class Settings:
    cases: tuple[Case, ...]
    repeats: int
    smoke: bool
    log: Callable[[str], None] = field(default=print)


def run(settings: Settings) -> dict[str, Any]:
    started = time.time()
    rows = []
    for case in settings.cases:
        inputs = Inputs.draw(case, SEED)
        for structure in STRUCTURES:
            runs = [run_once(structure, inputs) for _ in range(settings.repeats)]
            rows.append(row(case, structure, runs, memory_once(structure, inputs)))
            settings.log(f"{case.name} {structure}: " + _figures_line(rows[-1]))
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started, 1),
        "smoke": settings.smoke,
        "repeats": settings.repeats,
        "machine": host(),
        "inputs": {
            "seed": SEED,
            "cancelled": CANCELLED,
            "keys": "(job_id, token) tuples",
            "start": START,
            "wheel": {"tick": 0.005, "slots": 256, "levels": 4},
            "cases": [asdict(case) | {"name": case.name} for case in settings.cases],
        },
        "rows": rows,
    }


def row(case: Case, structure: str, runs: Sequence[Run], memory: Memory) -> dict[str, Any]:
    fired = runs[0].expire.operations
    return {
        "case": case.name,
        "structure": structure,
        "timers": case.timers,
        "insert_us": summary([r.insert.us() for r in runs]),
        "cancel_us": summary([r.cancel.us() for r in runs]),
        "expire_us": summary([r.expire.us() for r in runs]),
        "wall_us": {
            phase: summary([getattr(r, phase).us("wall") for r in runs])
            for phase in ("insert", "cancel", "expire")
        },
        "wakes": runs[0].wakes,
        "timers_per_wake": round(fired / max(runs[0].wakes, 1), 2),
        "max_lateness_ms": round(max(r.max_lateness_s for r in runs) * 1e3, 3),
        "bytes_per_timer": memory.per_timer(),
    }


def host() -> dict[str, Any]:
    """What bench.machine.describe says of the host, without the servers (nor the redis
    client it imports): this benchmark runs in the plain environment too."""
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": len(_affinity()),
        "memory_gib": round(
            int((_proc_field("/proc/meminfo", "MemTotal") or "0 kB").split()[0]) / 2**20, 1
        ),
        "kernel": platform.release(),
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "chronoq_commit": _git_commit(),
    }


def _proc_field(path: str, name: str) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name):
            return line.split(":", 1)[1].strip()
    return None


def _git_commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args],  # noqa: S607 - git from PATH, as bench.machine runs it
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        return done.stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if changed else "")


def _affinity() -> set[int]:
    """The cores this process may run on (a container may see fewer than the machine has)."""
    try:
        return os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


# -- the report -------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    machine, inputs = results["machine"], results["inputs"]
    wheel = inputs["wheel"]
    lines = [
        "# Timing wheel against heapq",
        "",
        f"Run {results['started_at']}, {results['duration_s']:.0f} s, each case "
        f"{results['repeats']} time(s): the median, with the lowest and highest run in "
        "brackets. µs of this process's CPU per operation (expire: per timer fired), garbage "
        "collector off while timing; time is simulated (expire at each next deadline).",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
        f"Linux {machine['kernel']}, Python {machine['python']}, chronoq commit "
        f"{machine['chronoq_commit']}.",
        "",
        f"Inputs: keys {inputs['keys']}, deadlines uniform over each horizon (seed "
        f"{inputs['seed']}), {inputs['cancelled']:.0%} cancelled at random before the drain. "
        f"Wheel: tick {wheel['tick'] * 1e3:g} ms, {wheel['slots']} slots, {wheel['levels']} "
        "levels. heapq: (deadline, seq, key), cancel by lazy deletion (a dict of live key → "
        "seq marks the current entry; a cancel deletes the key; a stale entry is dropped when "
        "it reaches the top).",
        "",
    ]
    if results["smoke"]:
        lines += ["**Smoke run**: a few thousand timers at most, figures are not meaningful.", ""]
    lines += [*table_lines(results), *_target_lines(results), ""]
    return "\n".join(lines)


def table_lines(results: dict[str, Any]) -> list[str]:
    """The figures of a run, and heapq ÷ wheel per case and phase (also in RESULTS.md, figure
    8)."""
    lines = [
        "| case | structure | insert µs | cancel µs | expire µs | wakes | timers per wake "
        "| max lateness ms | B/timer added | B/timer after cancels |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        cells = [r["case"], r["structure"]]
        cells += [_cell(r[k]) for k in ("insert_us", "cancel_us", "expire_us")]
        cells += [f"{r['wakes']:,}", f"{r['timers_per_wake']:g}", f"{r['max_lateness_ms']:.3f}"]
        cells += [f"{r['bytes_per_timer'][k]:.0f}" for k in ("added", "after_cancel")]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", *_ratio_lines(results["rows"]), ""]


def _ratio_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """heapq's median over the wheel's, per case and phase: above 1 the wheel is cheaper.
    Ratios within one run hold better than the figures on a machine shared with other work."""
    lines = ["heapq ÷ wheel (median CPU per operation; above 1 the wheel is cheaper):", ""]
    lines += ["| case | insert | cancel | expire |", "|---|---|---|---|"]
    by_case: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["structure"]] = r
    for case, pair in by_case.items():
        if {"heapq", "wheel"} <= pair.keys():
            cells = [
                f"{pair['heapq'][k]['median'] / max(pair['wheel'][k]['median'], 1e-9):.2f}"
                for k in ("insert_us", "cancel_us", "expire_us")
            ]
            lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return lines


def _cell(figure: dict[str, Any]) -> str:
    return f"{figure['median']:.2f} ({figure['min']:.2f}–{figure['max']:.2f})"


def _figures_line(r: dict[str, Any]) -> str:
    return ", ".join(
        f"{phase} {r[phase + '_us']['median']:.2f} µs" for phase in ("insert", "cancel", "expire")
    )


def _target_lines(results: dict[str, Any]) -> list[str]:
    wheel = next(
        (r for r in results["rows"] if r["case"] == TARGET_CASE and r["structure"] == "wheel"),
        None,
    )
    if wheel is None or results["smoke"]:
        return [f"Targets (wheel, {TARGET_CASE}): not judged in this run."]
    parts = []
    for key, goal in TARGETS.items():
        measured = wheel[key]["median"]
        met = "met" if measured <= goal else "**not met**"
        parts.append(f"{key.removesuffix('_us')} ≤ {goal:g} µs: {measured:.2f} µs, {met}")
    return [f"Targets (wheel, {TARGET_CASE}): " + "; ".join(parts) + "."]


# -- the command ------------------------------------------------------------------------------


def settings_from(argv: Sequence[str]) -> tuple[Settings, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m bench.timing_wheel", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a hundredth of the timers, one run")
    parser.add_argument("--repeats", type=int, help="runs per case (default 3, smoke 1)")
    parser.add_argument(
        "--out",
        type=Path,
        help="where timing_wheel.json and .md go (default: bench/ for a full run, "
        "nowhere for a smoke run)",
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.smoke else 3)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    out = args.out or (None if args.smoke else Path(__file__).parent)
    return Settings(cases_for(args.smoke), repeats, args.smoke, _timestamped), out


def cases_for(smoke: bool) -> tuple[Case, ...]:
    """The full cases, or each at a share of its timers for a smoke run."""
    return tuple(
        Case(max(100, c.timers // SMOKE_SHARE), c.horizon, c.span) if smoke else c
        for c in FULL_CASES
    )


def _timestamped(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> int:
    settings, out = settings_from(argv)
    try:
        results = run(settings)
    except BenchCheckFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    report = markdown(results)
    print(report)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "timing_wheel.json").write_text(json.dumps(results, indent=2) + "\n", "utf-8")
        (out / "timing_wheel.md").write_text(report, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
