"""Rate limits: rates as people write them, token buckets, and the plan for one limited claim.

A queue may have a rate (a token bucket: `rate` tokens a second, holding at most `burst`, one
spent per job claimed) and a concurrency limit (at most N of its jobs running at once). A queue
may also limit each of its rate keys separately: a job carries a `rate_key` such as
`customer:42`, and the most specific key limit whose glob pattern matches it gives that key a
bucket of its own. Buckets live in the database and are charged in the claim's transaction, on
the database clock, so the limits hold across every worker process together.

A job held back by its key's bucket is not left at the head of the queue, where it would be
scanned again by every claim and hide other keys' jobs behind it: its `run_at` moves to the
instant its key will have a token for it. One noisy key thus becomes a stream at its own rate,
and the others go on.

Everything here is pure: the stores read the state, call `plan_limited_claim`, and write back
what it decided.
"""

from __future__ import annotations

import fnmatch
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from chronoq.core.validate import MAX_KEY_BYTES, utf8_size
from chronoq.errors import ConfigError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")
_PER = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
# The default bucket holds 50 ms worth of tokens: a herd released at once may start that many
# jobs together, and in any one second at most `rate + burst` start.
DEFAULT_BURST_SECONDS = 0.05
# A queue whose concurrency limit is reached is looked at again after this long: other workers'
# jobs finishing is not announced.
CONCURRENCY_RECHECK = timedelta(milliseconds=100)
MAX_RATE = 1_000_000.0
# Slower rates would put a key's deferred jobs, spaced at its rate, beyond any date.
MIN_RATE = 1 / 86400
MAX_CONCURRENCY = 2**31 - 1
# A bucket refills by elapsed seconds times its rate in floating point, so a token due by the
# clock can arrive as 5.999999999999996: counted whole within this much, it is not left behind
# for a claim that would otherwise wait a whole token's time for it.
TOKEN_ROUNDING = 1e-9


def parse_rate(text: str) -> float:
    """Read a rate such as ``"200/s"``, ``"5000/m"`` or ``"10/h"``; returns jobs per second."""
    if not isinstance(text, str):
        raise ConfigError(f"rate must be text such as '200/s', got {text!r}")
    match = _RATE.match(text.lower())
    if match is None:
        raise ConfigError(f"invalid rate {text!r}: use forms like 200/s, 5000/m, 10/h or 1/d")
    per_second = float(match.group(1)) / _PER[match.group(2)]
    if not MIN_RATE <= per_second <= MAX_RATE:
        raise ConfigError(f"invalid rate {text!r}: it must be at least 1/d and at most 1000000/s")
    return per_second


def check_burst(rate: float, burst: float | None) -> float:
    """The bucket size: given, or 50 ms worth of tokens (at least one job)."""
    if burst is None:
        return max(1.0, rate * DEFAULT_BURST_SECONDS)
    if isinstance(burst, bool) or not isinstance(burst, int | float) or not burst >= 1:
        raise ConfigError(f"burst must be a number of jobs, at least 1, got {burst!r}")
    if burst > sys.float_info.max:
        raise ConfigError(f"burst must be a finite number of jobs, got {burst!r}")
    return float(burst)


def check_concurrency(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"concurrency must be a whole number of jobs, at least 1, got {value!r}")
    if value > MAX_CONCURRENCY:
        raise ConfigError(f"concurrency must be at most {MAX_CONCURRENCY}, got {value}")
    return value


def check_pattern(pattern: str) -> str:
    if not isinstance(pattern, str) or not pattern or len(pattern) > 1000:
        raise ConfigError(f"a key pattern must be non-empty text, got {pattern!r}")
    if "\x00" in pattern:
        raise ConfigError(f"key pattern {pattern!r} contains a NUL character")
    if utf8_size("key pattern", pattern) > MAX_KEY_BYTES:
        raise ConfigError(f"key pattern is longer than {MAX_KEY_BYTES} bytes in UTF-8")
    return pattern


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket as stored: `tokens` as of `refilled_at` (None: never used, so full)."""

    rate: float
    burst: float
    tokens: float
    refilled_at: datetime | None

    def available(self, now: datetime) -> float:
        if self.refilled_at is None:
            return self.burst
        elapsed = max(0.0, (now - self.refilled_at).total_seconds())
        return min(self.burst, self.tokens + elapsed * self.rate)

    def spend(self, now: datetime, count: int) -> Bucket:
        return replace(self, tokens=self.available(now) - count, refilled_at=now)

    def whole_tokens(self, now: datetime) -> int:
        return math.floor(self.available(now) + TOKEN_ROUNDING)

    def next_token_at(self, now: datetime) -> datetime:
        """When the bucket will next hold a whole token."""
        missing = max(0.0, 1.0 - TOKEN_ROUNDING - self.available(now))
        return now + timedelta(seconds=missing / self.rate)


@dataclass(frozen=True, slots=True)
class KeyLimit:
    """A rate for every rate key matching `pattern` (a glob: * and ?), each key separately."""

    pattern: str
    rate: float
    burst: float

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.pattern)

    @property
    def specificity(self) -> tuple[bool, int]:
        """Exact patterns first, then the longest: `host:api.example.com` over `host:*`."""
        return (not any(ch in self.pattern for ch in "*?["), len(self.pattern))


def limit_for(key: str | None, limits: Sequence[KeyLimit]) -> KeyLimit | None:
    if key is None:
        return None
    matching = [limit for limit in limits if limit.matches(key)]
    return max(matching, key=lambda limit: limit.specificity, default=None)


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits and bucket as read, under its row lock, by a claim."""

    name: str
    rate: float | None
    burst: float | None
    concurrency: int | None
    tokens: float
    refilled_at: datetime | None

    @property
    def bucket(self) -> Bucket | None:
        if self.rate is None or self.burst is None:
            return None
        return Bucket(self.rate, self.burst, self.tokens, self.refilled_at)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A due pending job, in claim order. `expired`: its misfire policy is "skip" and it is
    later than its grace, so it is skipped instead of claimed."""

    id: int
    rate_key: str | None
    expired: bool = False


@dataclass(slots=True)
class ClaimPlan:
    claim: list[int] = field(default_factory=list)
    skip: list[int] = field(default_factory=list)
    defer: list[tuple[int, datetime]] = field(default_factory=list)
    queue_bucket: Bucket | None = None
    key_buckets: dict[str, Bucket] = field(default_factory=dict)
    # When to look at this queue again though nothing new was enqueued: the next token, or a
    # recheck of the concurrency limit. None: when the next job falls due.
    look_again_at: datetime | None = None


def plan_limited_claim(
    now: datetime,
    limit: int,
    queue: QueueLimits,
    running: int,
    candidates: Sequence[Candidate],
    key_limits: Sequence[KeyLimit],
    key_buckets: Mapping[str, Bucket],
) -> ClaimPlan:
    """Decide which candidates a claim takes, skips and defers, and what it charges."""
    plan = ClaimPlan()
    allowance, reason = _allowance(now, limit, queue, running)
    keys = _KeyLedger(now, key_limits, key_buckets)
    blocked = False
    for candidate in candidates:
        if candidate.expired:
            plan.skip.append(candidate.id)
        elif not keys.has_token(candidate.rate_key):
            plan.defer.append((candidate.id, keys.defer(candidate.rate_key)))
        elif len(plan.claim) < allowance:
            keys.spend(candidate.rate_key)
            plan.claim.append(candidate.id)
        else:
            blocked = True
    bucket = queue.bucket
    plan.queue_bucket = bucket.spend(now, len(plan.claim)) if bucket is not None else None
    plan.key_buckets = keys.spent()
    if blocked and len(plan.claim) < limit:
        plan.look_again_at = _look_again(now, reason, plan.queue_bucket)
    return plan


def _allowance(now: datetime, limit: int, queue: QueueLimits, running: int) -> tuple[int, str]:
    allowance, reason = max(0, limit), "limit"
    if queue.concurrency is not None and queue.concurrency - running < allowance:
        allowance, reason = max(0, queue.concurrency - running), "concurrency"
    bucket = queue.bucket
    tokens = bucket.whole_tokens(now) if bucket is not None else allowance
    if tokens < allowance:
        allowance, reason = max(0, tokens), "rate"
    return allowance, reason


def _look_again(now: datetime, reason: str, bucket: Bucket | None) -> datetime | None:
    if reason == "rate" and bucket is not None:
        return bucket.next_token_at(now)
    if reason == "concurrency":
        return now + CONCURRENCY_RECHECK
    return None


class _KeyLedger:
    """Per-key buckets during one claim: tokens spent, and jobs deferred after each key's last
    token, spaced at the key's rate so they come back in order."""

    def __init__(
        self, now: datetime, limits: Sequence[KeyLimit], buckets: Mapping[str, Bucket]
    ) -> None:
        self._now = now
        self._limits = limits
        self._stored = buckets
        self._available: dict[str, float] = {}
        self._rates: dict[str, KeyLimit] = {}
        self._spent: dict[str, int] = {}
        self._deferred: dict[str, int] = {}

    def _limit(self, key: str | None) -> KeyLimit | None:
        if key is None:
            return None
        if key not in self._rates and key not in self._available:
            limit = limit_for(key, self._limits)
            if limit is None:
                self._available[key] = math.inf
                return None
            self._rates[key] = limit
            self._available[key] = self._bucket(key, limit).available(self._now)
        return self._rates.get(key)

    def _bucket(self, key: str, limit: KeyLimit) -> Bucket:
        stored = self._stored.get(key)
        if stored is None:
            return Bucket(limit.rate, limit.burst, limit.burst, None)
        # A limit changed since the bucket was written applies from now on.
        return replace(stored, rate=limit.rate, burst=limit.burst)

    def has_token(self, key: str | None) -> bool:
        if self._limit(key) is None:
            return True
        assert key is not None
        return self._available[key] - self._spent.get(key, 0) >= 1 - TOKEN_ROUNDING

    def spend(self, key: str | None) -> None:
        if key is not None and key in self._rates:
            self._spent[key] = self._spent.get(key, 0) + 1

    def defer(self, key: str | None) -> datetime:
        assert key is not None
        limit = self._rates[key]
        position = self._deferred.get(key, 0) + 1
        self._deferred[key] = position
        left = self._available[key] - self._spent.get(key, 0)
        return self._now + timedelta(seconds=(position - left) / limit.rate)

    def spent(self) -> dict[str, Bucket]:
        """The buckets of the keys this claim charged, as they are to be stored."""
        touched = set(self._spent) | set(self._deferred)
        return {
            key: self._bucket(key, self._rates[key]).spend(self._now, self._spent.get(key, 0))
            for key in sorted(touched)
        }


def rate_keys(candidates: Iterable[Candidate]) -> list[str]:
    return sorted({c.rate_key for c in candidates if c.rate_key is not None})
