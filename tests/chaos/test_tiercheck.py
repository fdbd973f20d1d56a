"""The tier rules of the chaos checker on made-up histories: each rule flags what it must, and
lets pass what the tier may do (no services needed)."""

from __future__ import annotations

from typing import Any

from tests.chaos.tiercheck import Cut, Failover, TierFaults, Window, check_tier

TTL = 2.0
ELECTION_TIMEOUT = 1.0


def faults(**kwargs: Any) -> TierFaults:
    return TierFaults(TTL, ELECTION_TIMEOUT, **kwargs)


def takeover(pid: int, partition: int, epoch: int, wall: float = 0.0) -> dict[str, Any]:
    return {
        "event": "tier_takeover",
        "pid": pid,
        "wall": wall,
        "partition": partition,
        "epoch": epoch,
        "accepted": True,
    }


def write(
    pid: int, call: int, partition: int, epoch: int, result: str, wall: float = 0.0, moved: int = 1
) -> list[dict[str, Any]]:
    """A send line and its answer, one after the other."""
    ref = {"pid": pid, "op": "move", "partition": partition, "epoch": epoch, "call": call}
    return [
        {"event": "tier_send", "wall": wall, **ref},
        {"event": "tier_write", "wall": wall + 0.001, **ref, "result": result, "moved": moved},
    ]


def test_a_write_with_a_superseded_epoch_is_flagged_when_accepted_and_counted_when_refused() -> (
    None
):
    events = [
        takeover(1, 0, 5),
        *write(1, 0, 0, 5, "ok"),
        takeover(2, 0, 9),
        *write(1, 1, 0, 5, "stale"),
        *write(1, 2, 0, 5, "ok"),
    ]
    found = check_tier(events, faults())
    assert found.stale_refused == 1 and found.stale_moves_refused == 1
    assert len(found.stale_accepted) == 1 and "epoch 5" in found.stale_accepted[0]


def test_a_write_sent_before_the_takeover_may_be_accepted() -> None:
    send, answer = write(1, 0, 0, 5, "ok")
    found = check_tier([takeover(1, 0, 5), send, takeover(2, 0, 9), answer], faults())
    assert found.violations == []


def test_writes_of_a_resumed_leader_are_counted_apart() -> None:
    events = [takeover(1, 0, 5), takeover(2, 0, 9), *write(1, 0, 0, 5, "stale", wall=10.0)]
    found = check_tier(events, faults(resumed=[(1, 9.0)]))
    assert (found.resumed_stale, found.resumed_refused, found.violations) == (1, 1, [])
    twice = check_tier(events, faults(resumed=[(1, 12.0), (1, 9.0)]))
    assert twice.resumed_stale == 1


def test_one_staged_timer_starting_two_attempts_is_a_double_fire() -> None:
    confirm = {"event": "confirm", "refs": [[7, 3]], "claimed": [[7, 3]]}
    dropped = {"event": "confirm", "refs": [[7, 3]], "claimed": []}
    assert check_tier([confirm, dropped], faults()).violations == []
    assert check_tier([confirm, dropped], faults()).duplicate_entries == 1
    assert len(check_tier([confirm, confirm], faults()).double_fires) == 1


def test_a_failover_past_ttl_plus_one_second_is_flagged_unless_another_fault_was_near() -> None:
    slow = Failover(100.0, 3.5)
    assert len(check_tier([], faults(failovers=[slow])).slow_failovers) == 1
    near = faults(failovers=[slow], leader_faults=[100.0, 102.0])
    found = check_tier([], near)
    assert found.violations == [] and found.compound_failovers == [3.5]
    assert check_tier([], faults(failovers=[Failover(100.0, 2.4)])).failovers == [2.4]
    assert check_tier([], faults(failovers=[Failover(100.0, None)])).violations


def test_an_accepted_write_without_quorum_is_flagged_only_past_what_etcd_still_grants() -> None:
    loss = Window(100.0, 106.0)
    allowed = [takeover(1, 0, 5), *write(1, 0, 0, 5, "ok", wall=102.9)]
    assert check_tier(allowed, faults(quorum_losses=[loss])).violations == []
    late = [takeover(1, 0, 5), *write(1, 0, 0, 5, "ok", wall=103.5)]
    assert len(check_tier(late, faults(quorum_losses=[loss])).moved_without_quorum) == 1


def test_a_new_epoch_while_one_member_is_down_is_a_leader_change() -> None:
    events = [takeover(1, 0, 5, wall=90.0), takeover(2, 0, 9, wall=101.0)]
    assert len(check_tier(events, faults(member_losses=[Window(100.0, 102.0)])).leader_changes)
    alone = faults(member_losses=[Window(100.0, 102.0)], leader_faults=[100.5])
    assert check_tier(events, alone).violations == []
    again = [takeover(1, 0, 5, wall=90.0), takeover(1, 0, 5, wall=101.0)]
    assert check_tier(again, faults(member_losses=[Window(100.0, 102.0)])).violations == []


def test_the_first_move_after_a_redis_restart_is_measured() -> None:
    events = [
        takeover(1, 0, 5),
        *write(1, 0, 0, 5, "lost", wall=50.1, moved=0),
        *write(1, 1, 0, 5, "ok", wall=50.4, moved=0),
        *write(1, 2, 0, 5, "ok", wall=50.7, moved=3),
    ]
    found = check_tier(events, faults(redis_restarts=[50.0]))
    assert [round(s, 3) for s in found.redis_recoveries] == [0.701]


def test_a_leader_cut_off_from_etcd_may_act_for_half_a_ttl_and_not_after() -> None:
    cut = Cut(pid=1, start=100.0, end=104.5)  # trusted until 101.0 (+ 0.25 s of send slack)
    within = [takeover(1, 0, 5), *write(1, 0, 0, 5, "ok", wall=101.2)]
    assert check_tier(within, faults(etcd_cuts=[cut])).violations == []
    past = [takeover(1, 0, 5), *write(1, 0, 0, 5, "ok", wall=101.3)]
    found = check_tier(past, faults(etcd_cuts=[cut]))
    assert len(found.past_trust) == 1 and "into its cut from etcd" in found.past_trust[0]
    other = [takeover(2, 0, 5), *write(2, 0, 0, 5, "ok", wall=102.0)]  # not the cut process
    assert check_tier(other, faults(etcd_cuts=[cut])).violations == []
    healed = [takeover(1, 0, 5), *write(1, 0, 0, 5, "ok", wall=104.6)]  # after the heal
    assert check_tier(healed, faults(etcd_cuts=[cut])).violations == []


def test_writes_held_by_a_redis_cut_are_counted_by_their_late_answer() -> None:
    cut = Cut(pid=1, start=100.0, end=103.0)
    held = {"pid": 1, "op": "move", "partition": 0, "epoch": 5, "call": 0}
    events = [
        takeover(1, 0, 5),
        *write(1, 1, 0, 5, "ok", wall=99.0),  # answered before the cut: not held
        {"event": "tier_send", "wall": 101.0, **held},
        takeover(2, 0, 9, wall=102.5),
        {"event": "tier_write", "wall": 103.1, **held, "result": "stale", "moved": 0},
    ]
    found = check_tier(events, faults(redis_cuts=[cut]))
    assert dict(found.held_answers) == {"stale": 1}
    assert found.violations == []
