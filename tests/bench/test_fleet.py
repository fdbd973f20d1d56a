"""Figure 11 (`python -m bench.fleet`): its arithmetic, the names it gives pg_stat_statements'
texts, its report, and one quick run of a tiny fleet in each dispatch mode on private servers
(skipped without initdb, redis-server or etcd, like figure 8). The quick run's figures mean
nothing; it proves the fleet starts, the stream runs, and no job is lost or run twice."""

from __future__ import annotations

import re
from typing import Any

import pytest
from bench.fleet import STORE_SQL, Inputs, Size, measure, statement_name
from bench.report_fleet import goal, markdown

TIMES = "\N{MULTIPLICATION SIGN}"


def test_sizes_rates_and_capacity() -> None:
    size = Size.parse("4x64")
    assert (size.slots, size.label) == (256, f"4{TIMES}64")
    inputs = Inputs((size,), sleep_ms=(20, 100), load=0.5, max_rate=10_000.0)
    assert inputs.capacity(size) == pytest.approx(256 / 0.06)
    assert inputs.rate(size) == pytest.approx(256 / 0.06 / 2, abs=0.1)
    assert Inputs((size,), max_rate=800.0).rate(size) == 800.0
    with pytest.raises(ValueError, match="both ≥ 1"):
        Size.parse("0x8")


def as_pg_stat_statements(sql: str) -> str:
    """The text pg_stat_statements keeps: psycopg's placeholders and every constant as $n."""
    counter = iter(range(1, 10_000))
    text = re.sub(r"%\(\w+\)s", lambda _: f"${next(counter)}", sql)
    return re.sub(r"'(?:[^']|'')*'|-?\b\d+\b", lambda _: f"${next(counter)}", text)


@pytest.mark.parametrize(
    "name", ["job_claim", "job_claim_staged", "job_complete_many", "job_stage_candidates"]
)
def test_statements_are_named_after_the_stores_sql(name: str) -> None:
    assert statement_name(as_pg_stat_statements(STORE_SQL[name])) == name


def test_an_unknown_statement_keeps_its_text() -> None:
    assert statement_name("SELECT pg_notify($1, $2)") == "SELECT pg_notify($1, $2)"


def row(fleet: str, slots: int, dispatch: str, pg_us: float, p99: float) -> dict[str, Any]:
    return {
        "fleet": fleet,
        "slots": slots,
        "dispatch": dispatch,
        "offered_per_s": 400.0,
        "postgres_cpu_us_per_job": pg_us,
        "statements_per_job": 1.0,
        "statement_exec_us_per_job": 100.0,
        "commits_per_job": 1.0,
        "other_cpu_us_per_job": 500.0,
        "cpu_us_per_job": {"postgres": pg_us, "workers": 500.0},
        "lateness": {"p50_ms": p99 / 4, "p99_ms": p99, "max_ms": p99 * 2},
        "lost": 0,
        "run_twice": 0,
        "machine_busy_cores": 1.5,
        "figure_cores": 1.0,
        "statements": [
            {
                "name": "job_claim",
                "toplevel": True,
                "calls_per_job": 0.5,
                "exec_us_per_job": 80.0,
                "exec_us_per_call": 160.0,
                "rows_per_call": 2.0,
            }
        ],
    }


def test_the_goal_is_judged_at_256_slots_and_more() -> None:
    rows = [
        row(f"2{TIMES}32", 64, "db", 200.0, 5.0),
        row(f"2{TIMES}32", 64, "tiered", 100.0, 5.0),  # met, but below 256 slots: not judged
        row(f"4{TIMES}64", 256, "db", 300.0, 5.0),
        row(f"4{TIMES}64", 256, "tiered", 200.0, 15.0),  # 0.67 of db, 15 ms: met
        row(f"8{TIMES}128", 1024, "db", 300.0, 5.0),
        row(f"8{TIMES}128", 1024, "tiered", 200.0, 25.0),  # 0.67 of db but 25 ms: not met
    ]
    lines = goal(rows)
    assert len(lines) == 2
    assert lines[0].startswith(f"- 4{TIMES}64") and lines[0].endswith(": met")
    assert lines[1].startswith(f"- 8{TIMES}128") and "**not met**" in lines[1]
    result = {
        "inputs": {
            "sizes": ["2x32", "4x64", "8x128"],
            "sleep_ms": [20, 100],
            "load": 0.5,
            "max_rate": 800.0,
            "lead_s": 1.0,
            "warm_up_s": 8.0,
            "window_s": 20.0,
        },
        "machine": {"cpu": "t", "cores": 2, "postgres": "15", "redis": "7", "chronoq_commit": "x"},
        "tier": {"partitions": 16, "stage_horizon_s": 60.0, "leader_ttl_s": 5.0},
        "statements_source": "pg_stat_statements",
        "load_before": ["1.0", "1.0", "1.0"],
        "load_after": ["1.5", "1.0", "1.0"],
        "seconds": 300.0,
        "rows": rows,
    }
    text = markdown(result)
    assert f"| 4{TIMES}64 (256), 400/s | 300 / 200 (0.67{TIMES}) |" in text
    assert "`job_claim`" in text and "+0.50 not ours" in text


def test_a_quick_run_loses_no_job_in_either_mode() -> None:
    result = measure(Inputs.quick_run((Size(1, 4),)), log=lambda line: None)
    if "skipped" in result:
        from tests.conftest import _missing_service

        _missing_service(f"figure 11 needs its servers: {result['skipped']}")
    assert [r["dispatch"] for r in result["rows"]] == ["db", "tiered"]
    for measured in result["rows"]:
        assert measured["lost"] == 0 and measured["run_twice"] == 0
        assert measured["window_jobs"] > 0 and measured["lateness"]["p99_ms"] >= 0
        assert measured["statements"], "pg_stat_statements counted nothing"
    names = {s["name"] for r in result["rows"] for s in r["statements"]}
    assert {"job_claim", "job_claim_staged"} <= names
