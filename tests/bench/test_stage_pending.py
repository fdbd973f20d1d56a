"""The staging benchmark at a tiny size against the real server: every size gets its three
passes, read with the store's own statement, and the report a row each. Its figures mean
nothing at this size."""

from __future__ import annotations

import uuid

from bench.stage_pending import measure, report

from tests.bench.test_claim_head import reachable_admin_dsn


def test_a_tiny_run_measures_each_pass_at_each_size() -> None:
    admin = reachable_admin_dsn()
    database = f"chronoq_stage_pending_{uuid.uuid4().hex[:8]}"
    passes = measure([200, 2_000], 3600.0, 2, 50, admin, database)
    assert [(p.pending, p.kind) for p in passes] == [
        (size, kind) for size in (200, 2_000) for kind in ("full 3600 s", "full 5 s", "near")
    ]
    # An hour of the 24 h the jobs fall due over: about a 24th of them, read in pages of 50.
    full = {p.pending: p.rows for p in passes if p.kind == "full 3600 s"}
    assert 0 < full[2_000] < 2_000 / 6
    assert all(p.median_ms > 0 for p in passes)
    text = report(passes, {"machine": "m", "date": "d", "commit": "c", "repeats": 2, "page": 50})
    assert text.count("\n| ") == 1 + len(passes)  # the header, then a row a pass
