"""The sizing model's measurement path against the real servers, at a tiny size: it proves the
measurements run and give costs the model can use. Its figures mean nothing at this size."""

from __future__ import annotations

import math

import psycopg
from bench.tiermodel.costs import Costs
from bench.tiermodel.measure import MeasureSettings, measure
from bench.tiermodel.model import Fleet, plan

from tests.conftest import _admin_dsn, _missing_service


def test_a_tiny_measurement_gives_usable_costs(redis_url: str) -> None:
    admin = _admin_dsn()
    try:
        psycopg.connect(admin, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        _missing_service(f"PostgreSQL not reachable at CHRONOQ_TEST_PG_DSN: {exc}")
    settings = MeasureSettings(admin, redis_url, 500, 1_000, 2_000, etcd_requests=20)
    costs = measure(settings, log=lambda _line: None)

    assert isinstance(costs, Costs)
    for value in (costs.pg_row_bytes, costs.redis_bytes_per_timer, costs.sched_bytes_per_timer):
        assert value > 0
    assert set(costs.redis_move_us) == {"1", "100", "1000"}
    assert all(
        math.isfinite(v) and v >= 0 for v in costs.to_json().values() if isinstance(v, float)
    )
    assert plan(costs, Fleet(rate=1_000, pending=10_000)).resources
