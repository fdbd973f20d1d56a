"""The timing-wheel benchmark runs end to end at smoke size: every case for both structures,
checked (exact timers fired, none early), with memory per timer, ratios and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.timing_wheel import FULL_CASES, STRUCTURES, main, settings_from


def test_a_smoke_run_measures_every_case_and_writes_its_results(tmp_path: Path) -> None:
    assert main(["--smoke", "--out", str(tmp_path)]) == 0

    results = json.loads((tmp_path / "timing_wheel.json").read_text(encoding="utf-8"))
    assert results["smoke"] is True
    assert len(results["rows"]) == len(FULL_CASES) * len(STRUCTURES)
    for row in results["rows"]:
        assert row["insert_us"]["median"] > 0
        assert row["expire_us"]["median"] > 0
        assert row["bytes_per_timer"]["added"] > 0
    report = (tmp_path / "timing_wheel.md").read_text(encoding="utf-8")
    assert "heapq ÷ wheel" in report
    for stated in ("Smoke run", "Machine:", "Inputs:"):
        assert stated in report


def test_the_full_run_covers_10k_100k_and_1m_timers_and_writes_beside_the_module() -> None:
    settings, out = settings_from([])
    sizes = {case.timers for case in settings.cases if case.span == "over 60 s"}
    assert sizes == {10_000, 100_000, 1_000_000}
    assert settings.repeats >= 3
    assert out == Path(__file__).parents[2] / "bench"
    assert settings_from(["--smoke"])[1] is None
