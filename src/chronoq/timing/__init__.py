"""Timers in memory for the scale-out tier: a hierarchical timing wheel that says when the next
bucket of timers falls due and hands out every due timer of a bucket at once (see
`chronoq.timing.wheel` for the design)."""

from chronoq.timing.wheel import TimingWheel

__all__ = ["TimingWheel"]
