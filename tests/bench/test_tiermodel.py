"""The sizing model on fixed costs: which resource it names first, what it says to change, and
where a fleet saturates. The costs are round numbers chosen so each case is easy to check by
hand, not measurements."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from bench.tiermodel.__main__ import main
from bench.tiermodel.costs import Costs, CostsError, median_costs
from bench.tiermodel.model import Fleet, plan, saturation

COSTS = Costs(
    pg_insert_us=10.0,
    pg_claim_us=30.0,
    pg_finish_us=20.0,
    pg_stage_row_us=5.0,
    pg_row_bytes=300.0,
    pg_wal_bytes_per_job=1_500.0,
    redis_stage_us=1.0,
    redis_move_us={"1": 25.0, "100": 2.0, "1000": 1.5},
    redis_consume_us=1.5,
    redis_bytes_per_timer=100.0,
    sched_wheel_us=3.0,
    sched_redis_us=2.0,
    sched_stage_row_us=3.0,
    sched_bytes_per_timer=120.0,
    etcd_keepalive_us=400.0,
    etcd_range_us=1_800.0,
    etcd_range_keys=80,
)
# PostgreSQL per job with a 5 s horizon: 10 + 30 + 20 + 5 (new) + 5 x 5 (re-read) = 90 µs,
# so 16 cores take 16e6 / 90 = 177,778 jobs/s.
FLEET = Fleet(rate=100_000, pending=10_000_000, partitions=64, cores=16, horizon=5.0)
PG_CAPACITY = 16e6 / 90


def test_within_postgres_capacity_nothing_passes_100_percent() -> None:
    chosen = plan(COSTS, FLEET)
    assert chosen.resource("PostgreSQL CPU").utilisation == pytest.approx(FLEET.rate / PG_CAPACITY)
    assert chosen.bottleneck.name == "PostgreSQL CPU"
    assert all(r.ceiling < 1 for r in chosen.resources)


def test_doubling_the_rate_past_postgres_write_capacity_names_postgres() -> None:
    doubled = plan(COSTS, replace(FLEET, rate=2 * FLEET.rate))
    assert doubled.bottleneck.name == "PostgreSQL CPU"
    assert doubled.bottleneck.utilisation > 1
    assert doubled.bottleneck.change.startswith("partition the jobs table")


def test_the_fleet_saturates_where_postgres_reaches_its_cores() -> None:
    rate, resource = saturation(COSTS, FLEET)
    assert resource == "PostgreSQL CPU"
    assert rate == pytest.approx(PG_CAPACITY, rel=1e-6)


def test_a_long_horizon_makes_its_re_read_the_first_thing_to_change() -> None:
    chosen = plan(COSTS, replace(FLEET, horizon=60.0))
    assert chosen.bottleneck.name == "PostgreSQL CPU"
    assert chosen.bottleneck.change.startswith("lower stage_horizon")


def test_the_horizon_never_holds_more_than_the_pending_jobs() -> None:
    assert replace(FLEET, horizon=3_600.0).horizon_rows == FLEET.pending


def test_one_redis_given_that_cannot_keep_up_is_named_with_redis_cluster() -> None:
    heavy = replace(COSTS, redis_consume_us=10.0)  # 12.5 µs a timer: 1.25 cores at 100k/s
    chosen = plan(heavy, replace(FLEET, redis_shards=1))
    assert chosen.bottleneck.name == "Redis CPU"
    assert chosen.bottleneck.utilisation == pytest.approx(1.25)
    assert "Redis Cluster" in chosen.bottleneck.change
    assert plan(heavy, FLEET).resource("Redis CPU").units == 2  # sized: two shards


def test_schedulers_are_bounded_by_the_partitions() -> None:
    # 100k x (3 + 2 + 3) µs + 500k re-read rows x 3 µs = 2.3 cores, over at most 2 processes.
    chosen = plan(COSTS, replace(FLEET, partitions=2))
    schedulers = chosen.resource("scheduler CPU")
    assert schedulers.units == 2
    assert schedulers.utilisation == pytest.approx(1.15)
    assert chosen.bottleneck.name == "scheduler CPU"
    assert schedulers.change.startswith("more partitions")


def test_sized_units_keep_the_busiest_within_target() -> None:
    for rate in (1_000, 30_000, 100_000, 170_000):
        chosen = plan(COSTS, replace(FLEET, rate=rate))
        for name in ("Redis CPU", "scheduler CPU"):
            assert chosen.resource(name).utilisation <= FLEET.target


def test_etcd_load_follows_the_scheduler_processes_not_the_rate() -> None:
    ten = plan(COSTS, replace(FLEET, schedulers=10)).resource("etcd CPU")
    twenty = plan(COSTS, replace(FLEET, schedulers=20)).resource("etcd CPU")
    assert twenty.utilisation > ten.utilisation
    same = plan(COSTS, replace(FLEET, schedulers=10, rate=10_000)).resource("etcd CPU")
    assert same.utilisation == ten.utilisation


def test_a_bigger_move_batch_uses_the_nearest_measured_batch_below_it() -> None:
    assert COSTS.move_us(5_000) == 1.5
    assert COSTS.move_us(500) == 2.0
    assert COSTS.move_us(1) == 25.0


def test_costs_round_trip_through_json_and_refuse_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    COSTS.save(path)
    assert Costs.load(path) == COSTS
    with pytest.raises(CostsError, match="unknown cost field"):
        Costs.from_json(COSTS.to_json() | {"pg_claim": 1})
    data = COSTS.to_json()
    del data["pg_claim_us"]
    with pytest.raises(CostsError, match="missing cost field"):
        Costs.from_json(data)


def test_the_command_reports_bottleneck_assumptions_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    costs, out = tmp_path / "costs.json", tmp_path / "plan.json"
    COSTS.save(costs)
    argv = ["--costs", str(costs), "--rate", "200000", "--horizon", "5", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "PostgreSQL CPU. First change: partition the jobs table" in printed
    assert "Assumptions:" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["bottleneck"] == "PostgreSQL CPU"
    assert [row["rate"] for row in result["sweep"]] == [50_000, 100_000, 200_000, 400_000, 800_000]
    assert math.isclose(result["saturates_at"]["rate"], PG_CAPACITY, rel_tol=1e-6)


def test_the_committed_costs_file_loads() -> None:
    committed = Path(__file__).parents[2] / "bench" / "tiermodel_costs.json"
    costs = Costs.load(committed)
    assert costs.sources and costs.machine


def test_the_median_of_measurements_is_taken_figure_by_figure() -> None:
    runs = [
        replace(
            COSTS, pg_claim_us=c, redis_move_us={"1000": m}, sources={"pg_claim_us": "measured"}
        )
        for c, m in ((30.0, 2.0), (90.0, 1.0), (40.0, 3.0))
    ]
    merged = median_costs(runs)
    assert merged.pg_claim_us == 40.0
    assert merged.redis_move_us == {"1000": 2.0}
    assert merged.etcd_range_keys == 80
    assert merged.sources == {"pg_claim_us": "measured, median of 3"}
