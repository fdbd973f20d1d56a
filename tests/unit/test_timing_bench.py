"""The timing wheel's benchmark checks what it measures: one instant fires in one wake, and a
structure that loses a timer fails the run (the smoke run end to end: tests/bench). Its figures
are not looked at: speed belongs to `python -m bench.timing_wheel`."""

from __future__ import annotations

import pytest
from bench.timing_wheel import (
    BenchCheckFailed,
    Case,
    HeapTimers,
    Inputs,
    Settings,
    check,
    drain,
    run,
)


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
