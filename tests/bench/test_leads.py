"""A run whose enqueue outran its lead is taken again with the lead doubled, a few times; any
other failure of a measurement ends the run at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from bench.harness import LEAD_TRIES, BenchError, LeadOutrun, Settings, with_lead


def settings(logged: list[str]) -> Settings:
    return Settings.full(
        systems=("chronoq",), admin_dsn="", redis_url="", work_dir=Path("."), log=logged.append
    )


def test_an_outrun_lead_is_doubled_until_the_run_fits() -> None:
    logged: list[str] = []
    leads: list[float] = []

    def run(lead: float) -> float:
        leads.append(lead)
        if lead < 10:
            raise LeadOutrun(f"enqueue took longer than {lead:g} s")
        return lead

    assert with_lead(settings(logged), "lateness chronoq", 3.0, run) == 12.0
    assert leads == [3.0, 6.0, 12.0]
    assert logged == [
        "lateness chronoq: enqueue took longer than 3 s; run again with a lead of 6 s",
        "lateness chronoq: enqueue took longer than 6 s; run again with a lead of 12 s",
    ]


def failing(error: BenchError, leads: list[float]) -> Callable[[float], float]:
    """A run that notes each lead it is given and fails with `error` every time."""

    def run(lead: float) -> float:
        leads.append(lead)
        raise error

    return run


def test_the_last_outrun_ends_the_run() -> None:
    leads: list[float] = []
    with pytest.raises(LeadOutrun, match="too slow"):
        with_lead(settings([]), "herd chronoq", 2.0, failing(LeadOutrun("too slow"), leads))
    assert len(leads) == LEAD_TRIES


def test_other_failures_are_not_run_again() -> None:
    leads: list[float] = []
    with pytest.raises(BenchError, match="not serving"):
        with_lead(settings([]), "poison", 7.0, failing(BenchError("workers not serving"), leads))
    assert leads == [7.0]
