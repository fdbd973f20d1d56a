"""Misfires: what a schedule does about ticks the scheduler got to too late.

The scheduler keeps, per schedule, a cursor: the last tick it handled. Each pass calls
`resolve` with the cursor and the current time, and enqueues the `Fire`s it returns (one job per
fire, keyed by (schedule, tick), so a pass repeated by a second scheduler changes nothing).

```
  cursor                  now - grace         now                 now + lookahead
----|-----x------x------x------|------x----x---|-----x-----x-----------|------> time
          missed ticks            on time           fired ahead (late 0)
```

A pass considers the ticks t with ``cursor < t <= now + lookahead``:

- A tick is **missed** when ``t + grace < now``: the scheduler got to it more than `grace` late
  (it was down, paused or stuck). Missed ticks follow the schedule's policy:

  - ``run_late``: each missed tick fires, late.
  - ``skip``: missed ticks are dropped and counted in `Resolution.skipped`.
  - ``coalesce``: one fire, at the most recent missed tick, stands for them all (`Fire.ticks`);
    the others are counted in `Resolution.coalesced`.
  - ``catch_up`` N: the N most recent missed ticks fire; older ones are counted as skipped.

- Every other tick fires normally, late by ``max(0, now - t)``: at most `grace` for a tick just
  passed, 0 for a tick still ahead, which is enqueued early to run at its tick.

The cursor moves to the last tick the pass handled (fired, skipped or coalesced, including
ticks fired ahead); when nothing was due it stays where it was. A brand-new schedule has no
cursor: callers pass ``cursor = now``, so it starts at its next tick and owes nothing.

**Bounded work.** A pass never lists more than `max_ticks` ticks, however long the outage:

- ``run_late`` fires the oldest `max_ticks` missed ticks and leaves the cursor on the last one
  fired; the next pass goes on from there, so every tick fires exactly once, over several passes.
- ``skip``, ``coalesce`` and ``catch_up`` only need the few most recent missed ticks, which
  `Cadence.latest` finds without walking the outage, and a count. The count stops at
  `max_ticks` (for intervals it is arithmetic, for cron it walks the ticks): past that,
  `Resolution.exact` is False and `skipped`, `coalesced` and `Fire.ticks` are lower bounds.
  The policy itself still holds in full: one coalesced job, the N most recent ticks caught up.
- Ticks fired on time or ahead share what is left of the `max_ticks` budget; if they do not fit,
  the cursor stops at the last one fired and the next pass goes on.
"""

from __future__ import annotations

import difflib
import enum
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from chronoq.core.cron import Cadence
from chronoq.core.durations import parse_duration
from chronoq.core.validate import MAX_DELAY, check_aware
from chronoq.errors import InvalidDuration, InvalidSchedule

MAX_CATCH_UP = 10_000
DEFAULT_GRACE = timedelta(minutes=1)
_MICROSECOND = timedelta(microseconds=1)


class MisfirePolicy(enum.StrEnum):
    """What to do about ticks that were missed (see the module docstring)."""

    RUN_LATE = "run_late"
    SKIP = "skip"
    COALESCE = "coalesce"
    CATCH_UP = "catch_up"


@dataclass(frozen=True, slots=True)
class Misfire:
    """A schedule's misfire rule: its policy, the grace before a tick counts as missed, and
    for ``catch_up`` how many of the most recent missed ticks still run."""

    policy: MisfirePolicy
    grace: timedelta = DEFAULT_GRACE
    catch_up: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", _policy(self.policy))
        if not isinstance(self.grace, timedelta):
            raise InvalidSchedule(f"misfire grace must be a timedelta, got {self.grace!r}")
        if self.grace < timedelta(0):
            raise InvalidSchedule(
                f"misfire grace must not be negative, got {_seconds_text(self.grace)}"
            )
        if self.grace > MAX_DELAY:
            # The stores add the grace to a job's run_at: past this it leaves their range.
            raise InvalidSchedule(
                f"misfire grace must be at most 100 years, got {_seconds_text(self.grace)}"
            )
        _check_catch_up(self.policy, self.catch_up)

    @classmethod
    def parse(
        cls,
        policy: str,
        grace: timedelta | str | float | None = None,
        catch_up: int | None = None,
    ) -> Misfire:
        """Build a rule from settings as written: grace as a timedelta, seconds or "30s"."""
        return cls(_policy(policy), _grace(grace), catch_up)


@dataclass(frozen=True, slots=True)
class Fire:
    """One job to enqueue for a tick."""

    tick: datetime  # the tick instant (UTC); the job is keyed by (schedule, tick)
    late: timedelta  # how late it is enqueued: max(0, now - tick)
    ticks: int = 1  # ticks this job stands for (more than 1 only when coalesced)


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a pass decided: the jobs to enqueue, what it dropped, and where to start next."""

    fires: list[Fire]  # ascending by tick
    skipped: int  # missed ticks dropped by the policy (skip, or older than catch_up's bound)
    coalesced: int  # missed ticks folded into a coalesced job without a job of their own
    cursor: datetime  # the last tick handled: the next pass starts strictly after it
    exact: bool = True  # False when counting missed ticks stopped at max_ticks: counts are minimums


def resolve(
    cadence: Cadence,
    cursor: datetime,
    now: datetime,
    lookahead: timedelta,
    misfire: Misfire,
    *,
    max_ticks: int = 10_000,
) -> Resolution:
    """Decide which ticks after `cursor` fire now, given the time `now` (see the module doc)."""
    cursor = check_aware("cursor", cursor).astimezone(UTC)
    now = check_aware("now", now).astimezone(UTC)
    _check_resolve_args(lookahead, max_ticks)
    # The latest instant a tick can have and still be missed: t + grace < now.
    cutoff = now - misfire.grace - _MICROSECOND
    if misfire.policy is MisfirePolicy.RUN_LATE:
        missed = _run_late(cadence, cursor, cutoff, now, max_ticks)
    else:
        missed = _fold_missed(cadence, cursor, cutoff, now, misfire, max_ticks)
    if not missed.done:
        return missed.resolution
    return _on_time(cadence, missed, max(cursor, cutoff), now, now + lookahead, max_ticks)


@dataclass(frozen=True, slots=True)
class _Missed:
    """The missed part of a pass, and whether the pass may go on to the ticks after it."""

    resolution: Resolution
    done: bool  # False: the budget ran out inside the missed ticks
    used: int  # ticks listed so far, out of max_ticks


def _run_late(
    cadence: Cadence, cursor: datetime, cutoff: datetime, now: datetime, max_ticks: int
) -> _Missed:
    ticks = cadence.ticks_between(cursor, cutoff, max_ticks) if cursor < cutoff else []
    fires = [Fire(tick, now - tick) for tick in ticks]
    last = ticks[-1] if ticks else cursor
    # A full list may not be the whole outage: stop here and let the next pass go on.
    resolution = Resolution(fires, skipped=0, coalesced=0, cursor=last)
    return _Missed(resolution, done=len(ticks) < max_ticks, used=len(ticks))


def _fold_missed(
    cadence: Cadence,
    cursor: datetime,
    cutoff: datetime,
    now: datetime,
    misfire: Misfire,
    max_ticks: int,
) -> _Missed:
    count = cadence.count_between(cursor, cutoff, max_ticks) if cursor < cutoff else 0
    if count == 0:
        return _Missed(Resolution([], 0, 0, cursor), done=True, used=0)
    keep = min(_kept(misfire), count)
    # The most recent missed tick is needed even when none fires: it is the new cursor.
    recent = cadence.latest(cursor, cutoff, max(keep, 1))
    last = recent[-1]
    if misfire.policy is MisfirePolicy.COALESCE:
        fires = [Fire(last, now - last, ticks=count)]
        skipped, coalesced = 0, count - 1
    else:
        fires = [Fire(tick, now - tick) for tick in recent[len(recent) - keep :]]
        skipped, coalesced = count - keep, 0
    resolution = Resolution(fires, skipped, coalesced, last, exact=count < max_ticks)
    return _Missed(resolution, done=True, used=len(recent))


def _kept(misfire: Misfire) -> int:
    """How many of the most recent missed ticks fire (a coalesced job counts as one)."""
    if misfire.policy is MisfirePolicy.SKIP:
        return 0
    if misfire.policy is MisfirePolicy.COALESCE:
        return 1
    return misfire.catch_up or 1


def _on_time(
    cadence: Cadence,
    missed: _Missed,
    after: datetime,
    now: datetime,
    horizon: datetime,
    max_ticks: int,
) -> Resolution:
    """Add the ticks in (after, horizon] to what the missed part decided."""
    so_far = missed.resolution
    budget = max_ticks - missed.used
    ticks = cadence.ticks_between(after, horizon, budget) if after < horizon and budget else []
    if not ticks:
        return so_far
    fires = [Fire(tick, max(now - tick, timedelta(0))) for tick in ticks]
    return Resolution(
        so_far.fires + fires, so_far.skipped, so_far.coalesced, ticks[-1], so_far.exact
    )


def _policy(value: object) -> MisfirePolicy:
    if isinstance(value, MisfirePolicy):
        return value
    text = str(value).strip().lower().replace("-", "_")
    try:
        return MisfirePolicy(text)
    except ValueError:
        pass
    choices = [policy.value for policy in MisfirePolicy]
    close = difflib.get_close_matches(text, choices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InvalidSchedule(
        f"unknown misfire policy {value!r}: {hint}(choose {', '.join(choices)})"
    ) from None


def _grace(value: timedelta | str | float | None) -> timedelta:
    if value is None:
        return DEFAULT_GRACE
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return _grace_text(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidSchedule(f"misfire grace must be a finite duration, got {value!r}")
        if abs(value) > MAX_DELAY.total_seconds():
            raise InvalidSchedule(f"misfire grace must be between 0 and 100 years, got {value!r}s")
        return timedelta(seconds=value)
    raise InvalidSchedule(f"misfire grace must be a duration such as '30s', got {value!r}")


def _grace_text(text: str) -> timedelta:
    if text.strip().startswith("-"):
        # parse_duration would only say it cannot read the text.
        raise InvalidSchedule(f"misfire grace must not be negative, got {text.strip()}")
    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        reason = str(exc).partition(": ")[2]
        raise InvalidSchedule(f"invalid misfire grace {text!r}: {reason}") from None


def _check_catch_up(policy: MisfirePolicy, catch_up: object) -> None:
    if policy is not MisfirePolicy.CATCH_UP:
        if catch_up is not None:
            raise InvalidSchedule(
                f"catch_up only applies to the catch_up misfire policy, not {policy.value}"
            )
        return
    if catch_up is None:
        raise InvalidSchedule(
            "the catch_up misfire policy needs catch_up: how many missed ticks to run"
        )
    if isinstance(catch_up, bool) or not isinstance(catch_up, int):
        raise InvalidSchedule(f"catch_up must be an integer, got {catch_up!r}")
    if not 1 <= catch_up <= MAX_CATCH_UP:
        raise InvalidSchedule(f"catch_up must be between 1 and {MAX_CATCH_UP}, got {catch_up}")


def _check_resolve_args(lookahead: timedelta, max_ticks: int) -> None:
    if not isinstance(lookahead, timedelta) or lookahead < timedelta(0):
        raise ValueError(f"lookahead must be a timedelta of at least 0, got {lookahead!r}")
    if isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 1:
        raise ValueError(f"max_ticks must be a positive integer, got {max_ticks!r}")


def _seconds_text(delta: timedelta) -> str:
    """-5s, 1.5s: seconds without a float's trailing zeros or an exponent."""
    return f"{delta.total_seconds():.6f}".rstrip("0").rstrip(".") + "s"


RUN_LATE = Misfire(MisfirePolicy.RUN_LATE)


def job_misfire(policy: str, grace: timedelta | float | str | None) -> Misfire:
    """A one-off job's rule: "run_late" or "skip" (coalesce and catch_up are about a
    schedule's missed ticks, which a one-off job does not have)."""
    rule = Misfire.parse(policy, grace)
    if rule.policy not in (MisfirePolicy.RUN_LATE, MisfirePolicy.SKIP):
        raise InvalidSchedule(
            f"misfire policy {policy!r} applies to schedules only; a one-off job takes "
            "'run_late' or 'skip'"
        )
    return rule
