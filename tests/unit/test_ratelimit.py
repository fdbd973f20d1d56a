"""Rate limits as pure decisions: rates as written, token buckets, and one limited claim's plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronoq.core.ratelimit import (
    CONCURRENCY_RECHECK,
    Bucket,
    Candidate,
    KeyLimit,
    QueueLimits,
    check_burst,
    limit_for,
    parse_rate,
    plan_limited_claim,
)
from chronoq.errors import ConfigError

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def queue(rate: float | None = None, burst: float | None = None, **kw: object) -> QueueLimits:
    return QueueLimits(
        "q",
        rate,
        burst if burst is not None or rate is None else check_burst(rate, None),
        kw.get("concurrency"),  # type: ignore[arg-type]
        float(kw.get("tokens", 0.0)),  # type: ignore[arg-type]
        kw.get("refilled_at"),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("200/s", 200.0),
        ("5000/m", 5000 / 60),
        ("10/h", 10 / 3600),
        ("1/d", 1 / 86400),
        ("2.5 / second", 2.5),
        ("60/min", 1.0),
    ],
)
def test_rates_as_written(text: str, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["200", "fast", "0/s", "-1/s", "10/week", "", "2000000/s"])
def test_bad_rates_name_the_problem(text: str) -> None:
    with pytest.raises(ConfigError, match="rate"):
        parse_rate(text)


def test_default_burst_is_50ms_of_rate_and_at_least_one_job() -> None:
    assert check_burst(1000.0, None) == 50.0
    assert check_burst(5.0, None) == 1.0
    with pytest.raises(ConfigError, match="burst"):
        check_burst(10.0, 0.5)


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = Bucket(rate=10.0, burst=5.0, tokens=0.0, refilled_at=NOW)
    assert bucket.available(NOW + timedelta(seconds=0.2)) == pytest.approx(2.0)
    assert bucket.available(NOW + timedelta(hours=1)) == 5.0
    assert Bucket(10.0, 5.0, 0.0, None).available(NOW) == 5.0  # never used: full
    assert bucket.next_token_at(NOW) == NOW + timedelta(seconds=0.1)


def test_a_token_that_floating_point_leaves_a_hair_short_counts_as_whole() -> None:
    # 0.7 left over from earlier spends, then 3.3 ms at 1,000/s: four tokens by the clock,
    # 3.9999999999999982 in floating point.
    bucket = Bucket(rate=1000.0, burst=50.0, tokens=0.6999999999999984, refilled_at=NOW)
    later = NOW + timedelta(microseconds=3300)
    assert bucket.available(later) < 4.0
    assert bucket.whole_tokens(later) == 4
    candidates = [Candidate(i, None) for i in range(10)]
    limits = queue(rate=1000.0, burst=50.0, tokens=0.6999999999999984, refilled_at=NOW)
    assert plan_limited_claim(later, 10, limits, 0, candidates, [], {}).claim == [0, 1, 2, 3]


def test_a_rate_limited_queue_claims_what_its_tokens_allow_and_says_when_to_look_again() -> None:
    candidates = [Candidate(i, None) for i in range(10)]
    limits = queue(rate=10.0, burst=3.0, tokens=0.0, refilled_at=NOW - timedelta(seconds=0.25))
    plan = plan_limited_claim(NOW, 10, limits, 0, candidates, [], {})
    assert plan.claim == [0, 1]  # 2.5 tokens: two whole jobs
    assert plan.queue_bucket is not None
    assert plan.queue_bucket.tokens == pytest.approx(0.5)
    assert plan.look_again_at == NOW + timedelta(seconds=0.05)


def test_a_concurrency_limit_counts_running_jobs() -> None:
    candidates = [Candidate(i, None) for i in range(5)]
    plan = plan_limited_claim(NOW, 5, queue(concurrency=3), 2, candidates, [], {})
    assert plan.claim == [0]
    assert plan.look_again_at == NOW + CONCURRENCY_RECHECK


def test_expired_skip_jobs_are_skipped_and_take_no_token() -> None:
    candidates = [Candidate(1, None, expired=True), Candidate(2, None), Candidate(3, None)]
    plan = plan_limited_claim(NOW, 5, queue(rate=1.0, burst=1.0), 0, candidates, [], {})
    assert (plan.skip, plan.claim) == ([1], [2])


def test_the_most_specific_key_limit_wins() -> None:
    limits = [KeyLimit("host:*", 5.0, 1.0), KeyLimit("host:api.example.com", 50.0, 1.0)]
    assert limit_for("host:api.example.com", limits) == limits[1]
    assert limit_for("host:other", limits) == limits[0]
    assert limit_for("customer:1", limits) is None
    assert limit_for(None, limits) is None


def test_a_noisy_key_is_deferred_to_its_rate_and_others_go_on() -> None:
    noisy = [Candidate(i, "customer:noisy") for i in range(6)]
    quiet = [Candidate(100, "customer:quiet"), Candidate(101, None)]
    limit = KeyLimit("customer:*", rate=2.0, burst=2.0)
    plan = plan_limited_claim(NOW, 10, queue(), 0, noisy + quiet, [limit], {})
    assert plan.claim == [0, 1, 100, 101]
    # The rest of the noisy key's jobs wait for their tokens, half a second apart, in order.
    assert plan.defer == [
        (2, NOW + timedelta(seconds=0.5)),
        (3, NOW + timedelta(seconds=1.0)),
        (4, NOW + timedelta(seconds=1.5)),
        (5, NOW + timedelta(seconds=2.0)),
    ]
    assert plan.key_buckets["customer:noisy"].tokens == 0.0
    assert plan.key_buckets["customer:quiet"].tokens == 1.0


def test_a_stored_key_bucket_is_charged_from_where_it_was() -> None:
    limit = KeyLimit("k:*", rate=1.0, burst=5.0)
    stored = {"k:1": Bucket(1.0, 1.0, tokens=0.0, refilled_at=NOW - timedelta(seconds=1.5))}
    plan = plan_limited_claim(
        NOW, 5, queue(), 0, [Candidate(1, "k:1"), Candidate(2, "k:1")], [limit], stored
    )
    assert plan.claim == [1]
    assert plan.defer == [(2, NOW + timedelta(seconds=0.5))]


@given(
    rate=st.floats(min_value=1.0, max_value=1000.0),
    burst=st.floats(min_value=1.0, max_value=100.0),
    gaps=st.lists(st.floats(min_value=0.0, max_value=0.5), min_size=1, max_size=60),
    demand=st.integers(min_value=1, max_value=200),
)
def test_no_window_ever_gets_more_than_burst_plus_rate_times_its_length(
    rate: float, burst: float, gaps: list[float], demand: int
) -> None:
    """Claims at any moments, each asking for `demand` jobs: in every window [a, b] the jobs
    started number at most burst + rate * (b - a)."""
    limits = queue(rate=rate, burst=burst)
    now = NOW
    starts: list[tuple[datetime, int]] = []
    for gap in gaps:
        now += timedelta(seconds=gap)
        candidates = [Candidate(i, None) for i in range(demand)]
        plan = plan_limited_claim(now, demand, limits, 0, candidates, [], {})
        starts.append((now, len(plan.claim)))
        bucket = plan.queue_bucket
        assert bucket is not None
        limits = QueueLimits("q", rate, burst, None, bucket.tokens, bucket.refilled_at)
    for i, (first, _) in enumerate(starts):
        total = 0
        for moment, count in starts[i:]:
            total += count
            span = (moment - first).total_seconds()
            assert total <= burst + rate * span + 1e-6
