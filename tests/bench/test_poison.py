"""The poison figure's arithmetic: when the poison jobs fall due, which of them ended as they
must, and what the supervisor's log says about the worker processes they took down. A miscount
here would pass a poison job that was not dead at its max_attempts, or blame the throughput lost
on the wrong cause."""

from __future__ import annotations

from typing import Any

import pytest
from bench.merge import figure_label, merge
from bench.poison import (
    PoisonJob,
    dead_at,
    error_kinds,
    parse_log,
    poison_problems,
    schedule,
)
from bench.report import markdown

CRASH = {"error": "WorkerCrashed", "outcome": "retry"}
TIMEOUT = {"error": "chronoq.errors.JobTimeout", "outcome": "retry"}


def dead(job_id: int, task: str, *errors: dict[str, Any]) -> PoisonJob:
    """A job that ended as it must: dead after one attempt per error, the last one dead."""
    records = [dict(e) for e in errors]
    records[-1]["outcome"] = "dead"
    return PoisonJob(job_id, task, "dead", len(records), len(records), records)


def test_poison_jobs_fall_due_evenly_with_the_hangs_spread_among_them() -> None:
    plan = schedule(20, 5, 25.0)
    assert [offset for offset, _ in plan] == pytest.approx([0.5 + i for i in range(25)])
    assert [i for i, (_, task) in enumerate(plan) if task == "hang"] == [4, 9, 14, 19, 24]
    assert sum(1 for _, task in plan if task == "exit_hard") == 20
    small = schedule(2, 1, 0.3)
    assert [offset for offset, _ in small] == pytest.approx([0.05, 0.15, 0.25])
    assert [task for _, task in small] == ["exit_hard", "exit_hard", "hang"]
    assert schedule(0, 0, 10.0) == []


def test_jobs_dead_at_exactly_max_attempts_pass() -> None:
    jobs = [dead(1, "exit_hard", CRASH, CRASH, CRASH), dead(2, "hang", TIMEOUT, CRASH, TIMEOUT)]
    assert poison_problems(jobs, 3, expected=2) == []
    assert dead_at(jobs, 3) == 2


def test_every_way_a_poison_job_can_end_wrong_is_reported() -> None:
    early = PoisonJob(3, "exit_hard", "dead", 2, 3, [CRASH, CRASH | {"outcome": "dead"}])
    pending = PoisonJob(4, "hang", "pending", 1, 3, [TIMEOUT])
    records = [CRASH, CRASH, CRASH]  # dead at 3 attempts, but its last record says "retry"
    mislabelled = PoisonJob(5, "exit_hard", "dead", 3, 3, records)
    problems = poison_problems(
        [dead(1, "exit_hard", CRASH, CRASH, CRASH), early, pending, mislabelled], 3, expected=5
    )
    assert problems == [
        "4 poison jobs in the database, 5 enqueued",
        "job 3 (exit_hard) is dead after 2 of 3 attempts, not dead after 3",
        "job 4 (hang) is pending after 1 of 3 attempts, not dead after 3",
        "job 5 (exit_hard) has error outcomes ['retry', 'retry', 'retry']",
    ]
    assert dead_at([early, pending, mislabelled], 3) == 1  # its count alone cannot tell


def test_attempts_are_counted_by_how_they_ended() -> None:
    jobs = [
        dead(1, "hang", TIMEOUT, CRASH, TIMEOUT),
        dead(2, "exit_hard", CRASH, CRASH, CRASH),
        dead(3, "hang", TIMEOUT, TIMEOUT, TIMEOUT),
    ]
    assert error_kinds(jobs) == {
        "exit_hard": {"WorkerCrashed": 3},
        "hang": {"WorkerCrashed": 1, "chronoq.errors.JobTimeout": 5},
    }


LOG = """\
2026-11-30 23:57:57,784 INFO    chronoq.supervisor [100]: started worker process 0 (pid 110)
2026-11-30 23:57:57,796 INFO    chronoq.supervisor [100]: started worker process 1 (pid 111)
2026-11-30 23:57:58,031 INFO    chronoq.worker [110]: worker vm:110:aa serving work,poison (c)
2026-11-30 23:57:58,036 INFO    chronoq.worker [111]: worker vm:111:bb serving work,poison (c)
2026-11-30 23:57:59,592 INFO    chronoq.worker [111]: job 1 work attempt 1/10 done in 0.017s
2026-11-30 23:58:00,000 WARNING chronoq.supervisor [100]: worker process 0 (pid 110) exited \
with code 3
2026-11-30 23:58:00,001 WARNING chronoq.supervisor [100]: worker process 0 (pid 110) died \
running job(s) [7]; settling what it held
2026-11-30 23:58:00,001 INFO    chronoq.supervisor [100]: restarting worker process 0 in 0.5s: \
the jobs it ran pay for the crash
2026-11-30 23:58:00,200 WARNING chronoq.supervisor [100]: worker process 1 (pid 111) exited \
with code 75
2026-11-30 23:58:00,201 INFO    chronoq.supervisor [100]: started worker process 1 (pid 113)
2026-11-30 23:58:00,502 INFO    chronoq.supervisor [100]: started worker process 0 (pid 112)
2026-11-30 23:58:00,500 INFO    chronoq.worker [113]: worker vm:113:dd serving work,poison (c)
2026-11-30 23:58:00,800 INFO    chronoq.worker [112]: worker vm:112:cc serving work,poison (c)
2026-11-30 23:58:01,000 WARNING chronoq.supervisor [100]: worker process 0 (pid 112) was \
killed by SIGKILL
2026-11-30 23:58:02,000 INFO    chronoq.supervisor [100]: received SIGTERM: stopping the worker \
processes
2026-11-30 23:58:02,100 INFO    chronoq.supervisor [100]: worker process 1 (pid 113) exited \
with code 0
""".replace("\\\n", "")


def test_the_log_gives_each_death_its_kind_and_how_long_its_slot_stood_empty() -> None:
    log = parse_log(LOG)
    assert [(d.slot, d.pid, d.code) for d in log.deaths] == [
        (0, 110, 3),
        (1, 111, 75),
        (0, 112, -9),
    ]
    assert (log.crashed, log.retired, log.gave_up) == (2, 1, False)
    # Slot 0 from its crash to pid 112 serving; slot 1 from its retirement to pid 113 serving;
    # pid 112 was never replaced (the stop came first), so it has no time back.
    assert log.down_s() == pytest.approx([0.8, 0.3])
    assert log.deaths[2].back_at is None


def test_empty_slots_are_counted_inside_the_drain_only() -> None:
    log = parse_log(LOG)
    first = log.deaths[0].at  # 23:58:00.000
    # The whole of both gaps, and slot 0 empty again from 01.000 to the end at 01.500.
    assert log.down_within(first - 5, first + 1.5) == pytest.approx(0.8 + 0.3 + 0.5)
    # Cut at both ends: [00.300, 00.600] holds 0.3 s of slot 0's gap and 0.2 s of slot 1's.
    assert log.down_within(first + 0.3, first + 0.6) == pytest.approx(0.3 + 0.2)
    assert log.down_within(first - 5, first - 1) == 0.0


def test_a_supervisor_that_gave_up_is_seen() -> None:
    line = (
        "2026-11-30 23:58:03,000 ERROR   chronoq.supervisor [100]: worker process 0 crashed "
        "6 times within 60s; giving up\n"
    )
    assert parse_log(LOG + line).gave_up


def poison_row() -> dict[str, Any]:
    def same(value: float) -> dict[str, Any]:
        return {"runs": [value], "median": value, "min": value, "max": value}

    return {
        "system": "chronoq",
        "config": {"processes": 2, "concurrency": 100, "batch": 100},
        "work_jobs": 200_000,
        "exit_hard": 20,
        "hang": 5,
        "max_attempts": 3,
        "timeout_s": 0.5,
        "baseline_jobs_per_s": same(8_000),
        "poisoned_jobs_per_s": same(4_000),
        "ratio": same(0.5),
        "deaths": same(52),
        "crashed": same(49),
        "crashed_workers": same(49),
        "retired": same(3),
        "down_s_per_death": same(0.8),
        "down_share": same(0.47),
        "poison_jobs": 25,
        "poison_dead_at_max_attempts": 25,
        "poison_errors": {"exit_hard": {"WorkerCrashed": 60}},
        "work_retried": same(4_780),
        "work_extra_attempts": same(4_790),
        "work_not_done": 0,
        "supervisor_running": True,
        "supervisor_exit_codes": [0, 0],
    }


MACHINE = [
    "cpu",
    "cores",
    "memory_gib",
    "kernel",
    "python",
    "postgres",
    "redis",
    "sqlite",
    "chronoq_commit",
]


def results(figures: dict[str, Any], figures_run: list[str]) -> dict[str, Any]:
    return {
        "started_at": "2026-01-01T00:00:00Z",
        "duration_s": 10.0,
        "smoke": False,
        "repeats": 3,
        "machine": dict.fromkeys(MACHINE, "x"),
        "figures_run": figures_run,
        "systems": {
            "chronoq": {
                "title": "chronoq (PostgreSQL)",
                "version": "0.1.0",
                "backend": "postgres",
                "notes": "",
            }
        },
        "figures": figures,
    }


def test_the_poison_figure_merges_alone_and_is_reported_as_figure_7() -> None:
    base = results({"drain": [], "herd": [{"system": "chronoq", "skipped": "no"}]}, ["drain"])
    merged = merge(base, results({"poison": [poison_row()]}, ["poison"]))
    assert merged["figures"]["herd"] == base["figures"]["herd"]
    assert merged["figures"]["poison"] == [poison_row()]
    assert figure_label("poison") == "figure 7 (poison jobs beside ordinary work)"
    text = markdown(merged, {})
    assert "Figure 7 (poison jobs beside ordinary work) came from a separate run" in text
    assert "## 7. Poison jobs beside ordinary work" in text
    row = (
        "| chronoq (PostgreSQL) | 2p c100 b100 | 200,000 | 20 exit_hard + 5 hang | "
        "8,000 (8,000-8,000) | 4,000 (4,000-4,000) | 0.50 (0.50-0.50) | 52 (52-52): 49 + 3 | "
        "0.80 (0.80-0.80) | 47% (47%-47%) | 25 of 25 | 4,780 (4,780-4,780) (4,790) | 0 | yes |"
    )
    assert row.replace("-", "\N{EN DASH}") in text
