"""Misfire policies: what a scheduler pass fires after an outage, on time and ahead, how it
bounds its work, and the settings it refuses. Every scenario runs on an interval and on the
cron expression with the same ticks, which go through different code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronoq.core.cron import Cadence, parse_cadence
from chronoq.core.misfire import Fire, Misfire, MisfirePolicy, Resolution, resolve
from chronoq.errors import InvalidSchedule, NaiveDatetime

GRACE = timedelta(seconds=30)
NO_LOOKAHEAD = timedelta(0)


def at(hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 5, 1, hour, minute, second, micro, tzinfo=UTC)


def minutes(first: int, last: int) -> list[datetime]:
    """The minute ticks 10:first .. 10:last."""
    return [at(10, m) for m in range(first, last + 1)]


@pytest.fixture(params=["every 1m", "* * * * *"])
def minutely(request: pytest.FixtureRequest) -> Cadence:
    return parse_cadence(request.param)


def rule(policy: str, catch_up: int | None = None) -> Misfire:
    return Misfire.parse(policy, GRACE, catch_up)


# -- after an outage: cursor 10:00, the scheduler comes back at 10:30:20 --------------------------
# Ticks 10:01 .. 10:29 are missed (t + 30s < now); 10:30 is 20s late, within grace.


def outage(cadence: Cadence, misfire: Misfire, lookahead: timedelta = NO_LOOKAHEAD) -> Resolution:
    return resolve(cadence, at(10, 0), at(10, 30, 20), lookahead, misfire)


def test_run_late_fires_every_missed_tick(minutely: Cadence) -> None:
    result = outage(minutely, rule("run_late"))
    assert [fire.tick for fire in result.fires] == minutes(1, 30)
    assert result.fires[0] == Fire(at(10, 1), timedelta(minutes=29, seconds=20))
    assert result.fires[-1] == Fire(at(10, 30), timedelta(seconds=20))
    assert (result.skipped, result.coalesced, result.cursor) == (0, 0, at(10, 30))


def test_skip_drops_missed_ticks(minutely: Cadence) -> None:
    result = outage(minutely, rule("skip"))
    assert result.fires == [Fire(at(10, 30), timedelta(seconds=20))]
    assert (result.skipped, result.coalesced, result.cursor) == (29, 0, at(10, 30))


def test_coalesce_runs_one_job_for_all_missed_ticks(minutely: Cadence) -> None:
    result = outage(minutely, rule("coalesce"))
    assert result.fires == [
        Fire(at(10, 29), timedelta(minutes=1, seconds=20), ticks=29),
        Fire(at(10, 30), timedelta(seconds=20)),
    ]
    assert (result.skipped, result.coalesced, result.cursor) == (0, 28, at(10, 30))
    assert result.exact


def test_catch_up_runs_the_most_recent_missed_ticks(minutely: Cadence) -> None:
    result = outage(minutely, rule("catch_up", 3))
    assert [fire.tick for fire in result.fires] == minutes(27, 30)
    assert result.fires[0].late == timedelta(minutes=3, seconds=20)
    assert (result.skipped, result.coalesced, result.cursor) == (26, 0, at(10, 30))


def test_catch_up_bound_above_the_missed_count_runs_them_all(minutely: Cadence) -> None:
    result = resolve(minutely, at(10, 27), at(10, 30, 20), NO_LOOKAHEAD, rule("catch_up", 5))
    assert [fire.tick for fire in result.fires] == minutes(28, 30)
    assert result.skipped == 0


@pytest.mark.parametrize("policy", ["skip", "coalesce", "catch_up"])
def test_an_outage_with_lookahead_also_fires_ahead(minutely: Cadence, policy: str) -> None:
    result = outage(
        minutely, rule(policy, 2 if policy == "catch_up" else None), timedelta(minutes=2)
    )
    ahead = [fire for fire in result.fires if fire.tick > at(10, 30, 20)]
    assert ahead == [Fire(at(10, 31), timedelta(0)), Fire(at(10, 32), timedelta(0))]
    assert result.cursor == at(10, 32)


# -- the normal case-------------------------------------------------------------------------------

POLICIES = [rule("run_late"), rule("skip"), rule("coalesce"), rule("catch_up", 4)]


@pytest.mark.parametrize("misfire", POLICIES, ids=str)
def test_a_tick_within_grace_fires_under_every_policy(minutely: Cadence, misfire: Misfire) -> None:
    result = resolve(minutely, at(10, 29), at(10, 30, 5), NO_LOOKAHEAD, misfire)
    assert result == Resolution([Fire(at(10, 30), timedelta(seconds=5))], 0, 0, at(10, 30))


@pytest.mark.parametrize("misfire", POLICIES, ids=str)
def test_nothing_due_leaves_the_cursor_alone(minutely: Cadence, misfire: Misfire) -> None:
    result = resolve(minutely, at(10, 30), at(10, 30, 40), NO_LOOKAHEAD, misfire)
    assert result == Resolution([], 0, 0, at(10, 30))


def test_a_tick_exactly_grace_late_is_not_missed(minutely: Cadence) -> None:
    on_the_edge = resolve(minutely, at(10, 29), at(10, 30, 30), NO_LOOKAHEAD, rule("skip"))
    assert on_the_edge.fires == [Fire(at(10, 30), GRACE)]
    just_past = resolve(minutely, at(10, 29), at(10, 30, 30, 1), NO_LOOKAHEAD, rule("skip"))
    assert (just_past.fires, just_past.skipped, just_past.cursor) == ([], 1, at(10, 30))


def test_zero_grace_misses_any_tick_in_the_past(minutely: Cadence) -> None:
    strict = Misfire.parse("skip", timedelta(0), None)
    assert resolve(minutely, at(10, 29), at(10, 30), NO_LOOKAHEAD, strict).fires == [
        Fire(at(10, 30), timedelta(0))
    ]
    late = resolve(minutely, at(10, 29), at(10, 30, 0, 1), NO_LOOKAHEAD, strict)
    assert (late.fires, late.skipped) == ([], 1)


def test_a_new_schedule_starts_at_its_next_tick_and_fires_ahead(minutely: Cadence) -> None:
    now = at(10, 30, 20)
    result = resolve(minutely, now, now, timedelta(minutes=2), rule("run_late"))
    assert result.fires == [Fire(at(10, 31), timedelta(0)), Fire(at(10, 32), timedelta(0))]
    assert result.cursor == at(10, 32)
    # The next pass, a little later, does not fire them again.
    again = resolve(minutely, result.cursor, at(10, 30, 50), timedelta(minutes=2), rule("skip"))
    assert again == Resolution([], 0, 0, at(10, 32))


def test_a_cursor_beyond_the_lookahead_changes_nothing(minutely: Cadence) -> None:
    result = resolve(minutely, at(11, 0), at(10, 30), timedelta(minutes=5), rule("run_late"))
    assert result == Resolution([], 0, 0, at(11, 0))


def test_results_are_in_utc_whatever_zone_the_inputs_use(minutely: Cadence) -> None:
    paris = ZoneInfo("Europe/Paris")
    result = resolve(
        minutely,
        at(10, 0).astimezone(paris),
        at(10, 30, 20).astimezone(paris),
        NO_LOOKAHEAD,
        rule("skip"),
    )
    assert result == outage(minutely, rule("skip"))
    assert result.cursor.tzinfo is UTC
    assert all(fire.tick.tzinfo is UTC for fire in result.fires)


# -- bounded work----------------------------------------------------------------------------------


def passes(
    cadence: Cadence, misfire: Misfire, cursor: datetime, now: datetime, max_ticks: int
) -> list[Resolution]:
    """Run passes at the same `now` until one changes nothing."""
    done: list[Resolution] = []
    while True:
        result = resolve(cadence, cursor, now, NO_LOOKAHEAD, misfire, max_ticks=max_ticks)
        if result.cursor == cursor:
            return done
        done.append(result)
        cursor = result.cursor


def test_run_late_continues_where_a_full_pass_stopped(minutely: Cadence) -> None:
    first = resolve(
        minutely, at(10, 0), at(10, 30, 20), NO_LOOKAHEAD, rule("run_late"), max_ticks=20
    )
    assert [fire.tick for fire in first.fires] == minutes(1, 20)
    assert first.cursor == at(10, 20)
    second = resolve(
        minutely, first.cursor, at(10, 30, 20), NO_LOOKAHEAD, rule("run_late"), max_ticks=20
    )
    assert [fire.tick for fire in second.fires] == minutes(21, 30)
    assert second.cursor == at(10, 30)


@pytest.mark.parametrize("max_ticks", [1, 3, 7, 29, 30, 31])
def test_run_late_passes_fire_every_tick_exactly_once(minutely: Cadence, max_ticks: int) -> None:
    results = passes(minutely, rule("run_late"), at(10, 0), at(10, 30, 20), max_ticks)
    fired = [fire.tick for result in results for fire in result.fires]
    assert fired == minutes(1, 30)
    assert all(len(result.fires) <= max_ticks for result in results)


def test_ticks_ahead_beyond_the_budget_wait_for_the_next_pass(minutely: Cadence) -> None:
    now = at(10, 30, 20)
    first = resolve(minutely, now, now, timedelta(hours=1), rule("skip"), max_ticks=10)
    assert [fire.tick for fire in first.fires] == minutes(31, 40)
    second = resolve(minutely, first.cursor, now, timedelta(hours=1), rule("skip"), max_ticks=10)
    assert [fire.tick for fire in second.fires] == minutes(41, 50)


@pytest.mark.parametrize("expression", ["every 1s", "* * * * * *"])
def test_a_long_outage_keeps_each_policy_within_the_budget(expression: str) -> None:
    cadence = parse_cadence(expression)
    # 3569 missed ticks (09:00:01 .. 09:59:29), then 31 within grace (09:59:30 .. 10:00:00).
    cursor, now = at(9, 0), at(10, 0)
    budget = 1000
    last_missed = at(9, 59, 29)

    coalesced = resolve(cadence, cursor, now, NO_LOOKAHEAD, rule("coalesce"), max_ticks=budget)
    assert coalesced.fires[0] == Fire(last_missed, now - last_missed, ticks=budget)
    assert len(coalesced.fires) == 1 + 31  # the one coalesced job, then 09:59:30 .. 10:00:00
    assert (coalesced.coalesced, coalesced.exact) == (budget - 1, False)

    caught = resolve(cadence, cursor, now, NO_LOOKAHEAD, rule("catch_up", 3), max_ticks=budget)
    assert [fire.tick for fire in caught.fires[:3]] == [
        last_missed - timedelta(seconds=2),
        last_missed - timedelta(seconds=1),
        last_missed,
    ]
    assert (caught.skipped, caught.exact, caught.cursor) == (budget - 3, False, at(10, 0))

    skipped = resolve(cadence, cursor, now, NO_LOOKAHEAD, rule("skip"), max_ticks=budget)
    assert skipped.fires[0].tick == at(9, 59, 30)
    assert (skipped.skipped, skipped.exact, skipped.cursor) == (budget, False, at(10, 0))


def test_counts_are_exact_below_the_budget(minutely: Cadence) -> None:
    result = resolve(minutely, at(10, 0), at(10, 30, 20), NO_LOOKAHEAD, rule("skip"), max_ticks=30)
    assert (result.skipped, result.exact) == (29, True)


# -- every pass accounts for each tick once (property)---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    expression=st.sampled_from(["every 1m", "*/5 * * * *", "every 7m", "0 * * * *", "30 2 * * *"]),
    zone=st.sampled_from(["UTC", "America/New_York"]),
    policy=st.sampled_from([*MisfirePolicy]),
    cursor_offset=st.integers(0, 3 * 86_400),
    elapsed=st.integers(0, 3 * 86_400),
    grace=st.integers(0, 3600),
    lookahead=st.integers(0, 3600),
    catch_up=st.integers(1, 5),
    max_ticks=st.integers(1, 40),
)
def test_a_pass_accounts_for_each_tick_once(
    expression: str,
    zone: str,
    policy: MisfirePolicy,
    cursor_offset: int,
    elapsed: int,
    grace: int,
    lookahead: int,
    catch_up: int,
    max_ticks: int,
) -> None:
    cadence = parse_cadence(expression, zone)
    cursor = datetime(2026, 10, 30, tzinfo=UTC) + timedelta(seconds=cursor_offset)
    now = cursor + timedelta(seconds=elapsed)
    misfire = Misfire.parse(policy, grace, catch_up if policy is MisfirePolicy.CATCH_UP else None)
    result = resolve(
        cadence, cursor, now, timedelta(seconds=lookahead), misfire, max_ticks=max_ticks
    )

    covered = cadence.ticks_between(cursor, result.cursor, 10_000)
    ticks = [fire.tick for fire in result.fires]
    assert ticks == sorted(set(ticks)) and set(ticks) <= set(covered)
    assert result.cursor == (covered[-1] if covered else cursor)
    assert result.cursor <= now + timedelta(seconds=lookahead)
    assert len(result.fires) <= max_ticks
    if result.exact:
        assert sum(fire.ticks for fire in result.fires) + result.skipped == len(covered)
    for fire in result.fires:
        assert fire.late == max(now - fire.tick, timedelta(0))
    # A tick that is not missed always fires, whatever the policy.
    cutoff = now - timedelta(seconds=grace)
    assert all(tick in ticks for tick in covered if tick >= cutoff)
    if policy is MisfirePolicy.COALESCE:
        assert sum(1 for fire in result.fires if fire.tick < cutoff) <= 1
    if policy is MisfirePolicy.CATCH_UP:
        assert sum(1 for fire in result.fires if fire.tick < cutoff) <= catch_up


# -- settings -----------------------------------------------------------------------------------


def test_parse_reads_settings_as_written() -> None:
    assert Misfire.parse("run_late", None, None) == Misfire(MisfirePolicy.RUN_LATE)
    assert Misfire.parse("run_late", None, None).grace == timedelta(minutes=1)
    assert Misfire.parse(" Catch-Up ", "2m", 5) == Misfire(
        MisfirePolicy.CATCH_UP, timedelta(minutes=2), 5
    )
    assert Misfire.parse("skip", 2.5, None).grace == timedelta(seconds=2.5)
    assert Misfire.parse("skip", 0, None).grace == timedelta(0)
    assert Misfire.parse(MisfirePolicy.COALESCE, timedelta(seconds=9), None).policy == "coalesce"


def test_a_policy_given_as_text_to_the_constructor_is_checked() -> None:
    assert Misfire("skip").policy is MisfirePolicy.SKIP  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="unknown misfire policy"):
        Misfire("later")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "grace", "catch_up", "message"),
    [
        (
            "skp",
            None,
            None,
            "unknown misfire policy 'skp': did you mean 'skip'? "
            "(choose run_late, skip, coalesce, catch_up)",
        ),
        ("whenever", None, None, "unknown misfire policy 'whenever': (choose run_late, skip"),
        ("skip", "-5s", None, "misfire grace must not be negative, got -5s"),
        ("skip", timedelta(seconds=-5), None, "misfire grace must not be negative, got -5s"),
        ("skip", -0.5, None, "misfire grace must not be negative, got -0.5s"),
        ("skip", "soon", None, "invalid misfire grace 'soon': use forms like 30s"),
        ("skip", float("nan"), None, "misfire grace must be a finite duration, got nan"),
        ("skip", True, None, "misfire grace must be a duration such as '30s', got True"),
        ("catch_up", None, None, "the catch_up misfire policy needs catch_up"),
        ("catch_up", None, 0, "catch_up must be between 1 and 10000, got 0"),
        ("catch_up", None, 10_001, "catch_up must be between 1 and 10000, got 10001"),
        ("catch_up", None, True, "catch_up must be an integer, got True"),
        ("skip", None, 3, "catch_up only applies to the catch_up misfire policy, not skip"),
        ("run_late", None, 1, "catch_up only applies to the catch_up misfire policy, not run_late"),
    ],
)
def test_bad_settings_name_the_problem(
    policy: str, grace: timedelta | str | float | None, catch_up: int | None, message: str
) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        Misfire.parse(policy, grace, catch_up)
    assert str(caught.value).startswith(message)


def test_resolve_refuses_naive_times_and_nonsense_bounds(minutely: Cadence) -> None:
    naive = datetime(2026, 5, 1, 10, 30)
    with pytest.raises(NaiveDatetime):
        resolve(minutely, at(10, 0), naive, NO_LOOKAHEAD, rule("skip"))
    with pytest.raises(NaiveDatetime):
        resolve(minutely, naive, at(10, 0), NO_LOOKAHEAD, rule("skip"))
    with pytest.raises(ValueError, match="lookahead must be a timedelta of at least 0"):
        resolve(minutely, at(10, 0), at(10, 30), timedelta(seconds=-1), rule("skip"))
    with pytest.raises(ValueError, match="max_ticks must be a positive integer"):
        resolve(minutely, at(10, 0), at(10, 30), NO_LOOKAHEAD, rule("skip"), max_ticks=0)
