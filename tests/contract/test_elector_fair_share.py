"""Fair share of partitions among the live members (no etcd: the arithmetic the electors share)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chronoq.tier.etcd.share import FairShare

holders = st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=9, unique=True)
partition_counts = st.integers(min_value=1, max_value=64)


@given(holders, partition_counts)
def test_shares_add_up_and_differ_by_at_most_one(members: list[str], partitions: int) -> None:
    quotas = [FairShare.of(members, holder, partitions).quota for holder in members]
    assert sum(quotas) == partitions
    assert max(quotas) - min(quotas) <= 1


def test_sixteen_partitions_among_three_members() -> None:
    members = ["a", "b", "c"]
    assert [FairShare.of(members, holder, 16).quota for holder in members] == [6, 5, 5]


def test_a_member_not_yet_seen_counts_itself_in() -> None:
    assert FairShare.of(["a"], "b", 16) == FairShare(index=1, members=2, partitions=16)


def test_a_member_prefers_its_own_residue_class_first() -> None:
    share = FairShare.of(["a", "b", "c"], "b", 16)
    order = share.to_campaign(held=[], free=range(16))
    assert order[:5] == [1, 4, 7, 10, 13]
    assert sorted(order) == list(range(16))


def test_nothing_to_campaign_for_at_the_share() -> None:
    share = FairShare.of(["a", "b"], "a", 4)
    assert share.to_campaign(held=[0, 1], free=[2, 3]) == []


def test_a_member_over_its_share_releases_what_it_prefers_least() -> None:
    share = FairShare.of(["a", "b"], "a", 8)  # a prefers 0 2 4 6, then 1 3 5 7
    assert share.to_release([0, 1, 2, 3, 4, 5]) == [5, 3]
    assert share.to_release([0, 2]) == []


@given(holders, partition_counts, st.data())
def test_sticky_shares_converge_from_any_start(
    members: list[str], partitions: int, data: st.DataObject
) -> None:
    """Members that each release their extras and then take free partitions up to their share
    (the elector's rule, one member at a time) end balanced, whoever held what at the start."""
    start = data.draw(st.lists(st.sampled_from([*members, None]), min_size=partitions))
    owner = dict(enumerate(start[:partitions]))
    for _ in range(3):
        for holder in members:
            share = FairShare.of(members, holder, partitions)
            held = [p for p, who in owner.items() if who == holder]
            for partition in share.to_release(held):
                owner[partition] = None
            free = [p for p, who in owner.items() if who is None]
            for partition in share.to_campaign(held, free)[: share.quota - len(held)]:
                owner[partition] = holder
    counts = {holder: sum(1 for who in owner.values() if who == holder) for holder in members}
    assert counts == {h: FairShare.of(members, h, partitions).quota for h in members}
