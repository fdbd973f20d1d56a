"""Fair share: how many partitions a scheduler process should lead, and which ones it prefers.

With M live members sorted by holder and P partitions, member i leads `P // M` partitions, plus
one if `i < P % M`: the shares differ by at most one and add up to P. Shares are sticky: a member
keeps what it already leads up to its share, so a member joining or leaving moves only the
partitions it must (about P / M), not most of them as `p % M == i` would after every change.

Which partitions: a member prefers its own residue class (`p % M == i`) and then the others in
order from i on. When every member starts at once, each campaigns for a different class and few
campaigns collide; a member over its share gives up the partitions it prefers least.

```
 P = 16, M = 3   shares 6, 5, 5
 member 0 prefers 0 3 6 9 12 15 | 1 2 4 5 7 8 ...
 member 1 prefers 1 4 7 10 13   | 2 3 5 6 8 9 ...
```
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FairShare:
    index: int  # of this member among the live members, sorted by holder
    members: int
    partitions: int

    @classmethod
    def of(cls, members: Iterable[str], holder: str, partitions: int) -> FairShare:
        """The share of `holder` among `members` (counted in even if its key is not seen yet)."""
        ranked = sorted({*members, holder})
        return cls(ranked.index(holder), len(ranked), partitions)

    @property
    def quota(self) -> int:
        base, rest = divmod(self.partitions, self.members)
        return base + (1 if self.index < rest else 0)

    def rank(self, partition: int) -> tuple[bool, int]:
        """Sort key: the partitions this member prefers come first."""
        return (partition % self.members != self.index, (partition - self.index) % self.partitions)

    def to_campaign(self, held: Collection[int], free: Iterable[int]) -> list[int]:
        """The free partitions to try for, most preferred first, while under the share (a
        campaign can lose, so the caller goes down the list until the share is full)."""
        if len(held) >= self.quota:
            return []
        return sorted(free, key=self.rank)

    def to_release(self, held: Collection[int]) -> list[int]:
        """The partitions held beyond the share, least preferred first."""
        extra = len(held) - self.quota
        if extra <= 0:
            return []
        return sorted(held, key=self.rank, reverse=True)[:extra]
