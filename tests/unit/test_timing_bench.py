"""The timing wheel's benchmark at a tiny size, so it cannot rot: every case runs, both
structures pass its checks, and the report states the run, the machine and the inputs. (Its
figures are not looked at: speed belongs to `python -m bench.timing_wheel`.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.timing_wheel import (
    FULL_CASES,
    BenchCheckFailed,
    Case,
    HeapTimers,
    Inputs,
    Settings,
    check,
    drain,
    main,
    run,
)


def test_the_smoke_run_measures_every_case_on_both_structures(tmp_path: Path) -> None:
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "timing_wheel.json").read_text(encoding="utf-8"))
    assert results["smoke"] is True
    cases = [case.name for case in FULL_CASES]
    assert [(r["case"], r["structure"]) for r in results["rows"]] == [
        (case.replace("100k", "1k").replace("1M", "3k"), structure)
        for case in cases
        for structure in ("wheel", "heapq")
    ]
    report = (tmp_path / "timing_wheel.md").read_text(encoding="utf-8")
    for stated in ("Machine:", "Inputs:", "Smoke run", "| 3k over 24 h | wheel |"):
        assert stated in report


def test_a_case_of_one_instant_fires_in_one_wake() -> None:
    case = Case(500, 0.0, "due at one instant")
    results = run(Settings((case,), repeats=1, smoke=True, log=lambda _: None))
    assert {r["structure"]: r["wakes"] for r in results["rows"]} == {"wheel": 1, "heapq": 1}


def test_a_structure_that_loses_a_timer_fails_the_run() -> None:
    inputs = Inputs.draw(Case(50, 60.0, "over 60 s"), seed=3)
    heap = HeapTimers()
    for key, deadline in inputs.deadlines:
        heap.add(key, deadline)
    for key in inputs.cancels:
        heap.cancel(key)
    wakes = drain(heap)
    check("heapq", inputs, wakes)  # the honest run passes
    with pytest.raises(BenchCheckFailed, match="fired 34 timers"):
        check("heapq", inputs, wakes[1:])


def test_a_structure_that_fires_early_fails_the_run() -> None:
    inputs = Inputs.draw(Case(10, 60.0, "over 60 s"), seed=3)
    left = [(key, d) for key, d in inputs.deadlines if key not in set(inputs.cancels)]
    early = [(deadline - 1.0, [key]) for key, deadline in left]
    with pytest.raises(BenchCheckFailed, match="early"):
        check("heapq", inputs, early)
