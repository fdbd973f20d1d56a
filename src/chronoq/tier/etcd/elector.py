"""Partition leaders elected with etcd leases: one lease per process, one key per partition.

```
 {prefix}/members/{holder}                  value holder, lease L   (one per live process)
 {prefix}/partitions/0007/leader            value holder, lease L   (created only if absent)
                      └─ create_revision = the epoch of this leadership (etcd's global revision,
                         so a later leader of the partition always has a higher one)

 step():  renew L ──► read {prefix}/ ──► delete keys withheld last step ──► over share: withhold
            │                                                            under share: create free
            └─ failed / L gone: return {} (step down)
```

Lease and trust
---------------
A process grants one lease of `ttl` seconds and renews it at every `step()`; the scheduler
loop calls `step()` often (every ttl/10 or so), and no thread of its own keeps the lease alive:
a loop that hangs loses its partitions after `ttl`, which is what a wedged leader should do.
A renewal sent at monotonic time `t` proves the lease lives until at least `t + ttl`, so the
partitions returned are trusted until `t + ttl/2`: that leaves the other half for a pause, a
slow step or a clock that runs a little fast, and the process has stopped acting long before
its keys can expire and a successor can be elected. A step that cannot renew returns {} and
names nothing it led.

When etcd cannot be reached (every member failed, or the step ran out of time), the lease is
kept: the next step renews it if it is still alive, and then the process leads what it led,
under the same epochs (nobody else can have held a partition whose key never went away; etcd
also extends every lease when its raft leader changes, so a short election costs one or two
steps of {} and no re-election). When etcd answers that the lease is gone (it expired while the
process was paused, or was revoked), the step returns {}, and the next one grants a new lease
and campaigns anew, for new and higher epochs.

Every request has a timeout of at most ttl/4, and a step as a whole never takes longer than
ttl/2 (the trust window): on a refused connection, a timeout or an unavailable member, the
request moves on to the next endpoint, and the member that answered stays the current one.

Fair share
----------
The live members are the member keys. Each process computes its share (`_share.FairShare`:
the shares of M members differ by at most one) and campaigns for free partitions with a
transaction that creates the leader key only while its `create_revision` is 0, bound to its
lease. A process over its share gives partitions up in two steps: it withholds them first (they
are no longer in what `step()` returns, so the caller stops acting on them), and deletes their
keys at its next step, guarded by the key's create_revision so that it can never delete a
successor's key. A process under its share waits for free partitions: the others give theirs up.

Takeover
--------
After a leader is SIGKILLed its keys expire with its lease, `ttl` later, and another process
takes its partitions at its next step: about `ttl` plus one step interval. `close()` revokes the
lease, which deletes the keys at once, so a successor takes over at its next step.

The keys are read by a plain range read at every step, not watched: the watch thread of etcd3gw
dies silently when its stream breaks, and the caller polls `step()` anyway.

Authentication
--------------
With `access` (a user and password, TLS files; see access.py) every request carries the token
etcd gave for that user, got again whenever a member no longer knows it. When etcd refuses the
user (a wrong password, no permission on the prefix), `check()`, `leaders()` and `members()`
raise a ConfigError saying so, which is how a scheduler finds out at start (`check()` also
proves, writing nothing, that the user may write the prefix); a step treats a refusal like an
outage: it warns once and leads nothing until etcd serves it again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from chronoq.coordination.base import Leadership, PartitionLeader
from chronoq.errors import ConfigError, CoordinationUnavailable
from chronoq.tier.etcd.access import EtcdAccess, EtcdRefused
from chronoq.tier.etcd.gateway import (
    EtcdUnreachable,
    Gateway,
    KeyValue,
    LeaseNotFound,
    parse_endpoints,
)
from chronoq.tier.etcd.share import FairShare

# The logger keeps the name it had before the elector moved into the tier: log filters use it.
log = logging.getLogger("chronoq.coordination.etcd")

T = TypeVar("T")

# etcd did not serve a request: no member answered in time, or it refused who we are.
_NOT_SERVED = (EtcdUnreachable, EtcdRefused)

__all__ = ["EtcdElector"]


@dataclass(frozen=True, slots=True)
class _View:
    """What one range read of the prefix found."""

    members: dict[str, KeyValue]
    leaders: dict[int, KeyValue]


class EtcdElector:
    """`PartitionElector` on etcd leases; see the module docstring for the design.

    `endpoints`: client URLs of etcd members (`http://host:port`), tried in this order;
    `holder`: this process's name, unique among the processes of the tier; `partitions`: how many
    partitions the tier has; `ttl`: the lease's time to live in seconds (5-10 s in production);
    `prefix`: the etcd key prefix of this tier; `access`: a user and password and TLS files, when
    etcd asks for them (a user:password@ in the endpoints serves too).
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        holder: str,
        partitions: int,
        ttl: float = 5.0,
        prefix: str = "chronoq",
        access: EtcdAccess | None = None,
    ) -> None:
        _check_holder(holder)
        _check_partitions(partitions)
        _check_ttl(ttl)
        self.holder = holder
        self.partitions = partitions
        self.ttl = float(ttl)
        self.prefix = _check_prefix(prefix)
        access = (access or EtcdAccess()).with_endpoint_login(endpoints)
        self._gateway = Gateway(parse_endpoints(endpoints), self.ttl / 4, access)
        self._lease: int | None = None
        self._held: dict[int, int] = {}  # partition -> epoch, the keys of our lease
        self._withheld: dict[int, int] = {}  # given up: not reported, deleted at the next step
        self._outage = False
        self._warned_duplicate = False
        self._closed = False
        self._lock = threading.Lock()

    @property
    def endpoints(self) -> list[str]:
        return [endpoint.url for endpoint in self._gateway.endpoints]

    def step(self) -> dict[int, Leadership]:
        """Renew, campaign and rebalance; the partitions led and trusted now. After `close()`,
        always {}. Leaderships returned by an earlier step end when this one is called."""
        with self._lock:
            if self._closed:
                return {}
            deadline = time.monotonic() + self.ttl / 2
            try:
                renewed_at = self._renew(deadline)
            except _NOT_SERVED as exc:
                self._note_outage(exc, renewed=False)
                return {}
            if renewed_at is None:
                return {}
            try:
                self._rebalance(deadline)
            except _NOT_SERVED as exc:
                # Renewed, so what we hold is still ours; only this step's changes are lost.
                self._note_outage(exc, renewed=True)
            else:
                self._note_reachable()
            return self._trusted(renewed_at)

    def leaders(self) -> list[PartitionLeader]:
        view = self._read_or_raise()
        return [
            PartitionLeader(partition, kv.value, kv.create_revision)
            for partition, kv in sorted(view.leaders.items())
        ]

    def members(self) -> list[str]:
        return sorted(self._read_or_raise().members)

    def check(self) -> None:
        """Raise now what would keep this elector from leading, without campaigning:
        CoordinationUnavailable when etcd cannot be reached, ConfigError when it refuses the
        user, or the user may not read and write the prefix."""
        self._read_or_raise()
        member = self._member_key(self.holder)
        self._served(lambda deadline: self._gateway.check_writable(member, deadline))

    def close(self) -> None:
        """Revoke the lease: every key of this process goes at once, so successors take over
        at their next step. Idempotent; `step()` returns {} from now on."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lease, self._lease = self._lease, None
            self._held.clear()
            self._withheld.clear()
            if lease is not None:
                self._revoke(lease)
            self._gateway.close()

    # Lease

    def _renew(self, deadline: float) -> float | None:
        """Renew (or first grant) the lease; when the renewal was sent, or None when etcd says
        the lease is gone (its keys are gone with it)."""
        sent_at = time.monotonic()
        if self._lease is None:
            self._lease = self._gateway.grant(math.ceil(self.ttl), deadline)
            self._held.clear()
            self._withheld.clear()
            self._put_member(deadline)
            return sent_at
        try:
            self._gateway.keepalive(self._lease, deadline)
        except LeaseNotFound:
            self._lose_lease()
            return None
        return sent_at

    def _lose_lease(self) -> None:
        log.warning(
            "etcd lease of %s is gone (expired or revoked): stepping down from %d partitions,"
            " campaigning again with a new lease",
            self.holder,
            len(self._held),
            extra={"action": "elector.lease_lost", "holder": self.holder},
        )
        self._lease = None
        self._held.clear()
        self._withheld.clear()

    def _revoke(self, lease: int) -> None:
        try:
            self._gateway.revoke(lease, time.monotonic() + self.ttl / 2)
        except _NOT_SERVED as exc:
            log.warning(
                "could not revoke the etcd lease of %s (%s): its partitions free up when it"
                " expires, within %.1fs",
                self.holder,
                exc,
                self.ttl,
                extra={"action": "elector.revoke_failed", "holder": self.holder},
            )

    def _put_member(self, deadline: float) -> None:
        assert self._lease is not None
        self._gateway.put(self._member_key(self.holder), self.holder, self._lease, deadline)

    # Rebalance

    def _rebalance(self, deadline: float) -> None:
        view = self._read(deadline)
        self._adopt(view, deadline)
        self._release_withheld(deadline)
        share = FairShare.of(view.members, self.holder, self.partitions)
        for partition in share.to_release(self._held):
            self._withheld[partition] = self._held[partition]
        free = [p for p in range(self.partitions) if p not in view.leaders]
        self._campaign(share, free, deadline)

    def _adopt(self, view: _View, deadline: float) -> None:
        """Take the read as the truth about what we hold, and repair our member key."""
        self._held = {
            partition: kv.create_revision
            for partition, kv in view.leaders.items()
            if self._ours(kv)
        }
        self._withheld = {p: e for p, e in self._withheld.items() if self._held.get(p) == e}
        member = view.members.get(self.holder)
        if member is None or member.lease != self._lease:
            if member is not None and not self._warned_duplicate:
                self._warned_duplicate = True
                log.warning(
                    "another process uses the holder name %s: holders must be unique",
                    self.holder,
                    extra={"action": "elector.duplicate_holder", "holder": self.holder},
                )
            self._put_member(deadline)

    def _release_withheld(self, deadline: float) -> None:
        for partition, epoch in sorted(self._withheld.items()):
            # Forgotten before the delete is sent: if it fails, the key may be gone already.
            del self._withheld[partition]
            self._held.pop(partition, None)
            self._gateway.delete_if_created_at(self._leader_key(partition), epoch, deadline)

    def _campaign(self, share: FairShare, free: list[int], deadline: float) -> None:
        assert self._lease is not None
        for partition in share.to_campaign(self._held, free):
            if len(self._held) >= share.quota:
                return
            kv = self._gateway.create(
                self._leader_key(partition), self.holder, self._lease, deadline
            )
            if kv is not None and self._ours(kv):
                self._held[partition] = kv.create_revision

    # Reads

    def _read(self, deadline: float) -> _View:
        members: dict[str, KeyValue] = {}
        leaders: dict[int, KeyValue] = {}
        for kv in self._gateway.range_prefix(self.prefix + "/", deadline):
            rest = kv.key[len(self.prefix) + 1 :]
            kind, _, name = rest.partition("/")
            if kind == "members" and name:
                members[name] = kv
            elif kind == "partitions" and (partition := self._partition_of(name)) is not None:
                leaders[partition] = kv
        return _View(members, leaders)

    def _read_or_raise(self) -> _View:
        return self._served(self._read)

    def _served(self, request: Callable[[float], T]) -> T:
        """`request(deadline)`, its failures raised as the errors the caller shows."""
        try:
            return request(time.monotonic() + self.ttl / 2)
        except EtcdUnreachable as exc:
            raise CoordinationUnavailable(f"etcd cannot be reached: {exc}") from None
        except EtcdRefused as exc:
            raise ConfigError(f"{exc} (key prefix {self.prefix}/)") from None

    def _partition_of(self, name: str) -> int | None:
        """The partition of `NNNN/leader`, or None for a key that is not one of ours."""
        number, _, leaf = name.partition("/")
        if leaf != "leader" or not number.isdigit():
            return None
        partition = int(number)
        return partition if partition < self.partitions else None

    def _ours(self, kv: KeyValue) -> bool:
        return kv.lease == self._lease and kv.value == self.holder

    def _trusted(self, renewed_at: float) -> dict[int, Leadership]:
        until = renewed_at + self.ttl / 2
        if until <= time.monotonic():  # the step itself outlasted the trust window
            return {}
        return {
            partition: Leadership(partition, epoch, until)
            for partition, epoch in sorted(self._held.items())
            if partition not in self._withheld
        }

    def _member_key(self, holder: str) -> str:
        return f"{self.prefix}/members/{holder}"

    def _leader_key(self, partition: int) -> str:
        return f"{self.prefix}/partitions/{partition:04d}/leader"

    # Outages: one warning when etcd goes away, one line when it is back.

    def _note_outage(self, exc: Exception, renewed: bool) -> None:
        if self._outage:
            return
        self._outage = True
        consequence = (
            f"keeping its {len(self._held)} partitions (the lease was renewed) without rebalancing"
            if renewed
            else "leading nothing until it answers again"
        )
        what = "refuses" if isinstance(exc, EtcdRefused) else "unreachable for"
        log.warning(
            "etcd %s %s (%s): %s",
            what,
            self.holder,
            exc,
            consequence,
            extra={"action": "elector.unreachable", "holder": self.holder},
        )

    def _note_reachable(self) -> None:
        if self._outage:
            self._outage = False
            log.info(
                "etcd reachable again for %s",
                self.holder,
                extra={"action": "elector.reachable", "holder": self.holder},
            )


def _check_holder(holder: str) -> None:
    if not isinstance(holder, str) or not holder or "/" in holder or not holder.isprintable():
        raise ConfigError(f"holder must be a non-empty name without '/', got {holder!r}")


def _check_partitions(partitions: int) -> None:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigError(f"partitions must be a whole number of at least 1, got {partitions!r}")


def _check_ttl(ttl: float) -> None:
    valid = isinstance(ttl, int | float) and not isinstance(ttl, bool)
    if not valid or not math.isfinite(ttl) or ttl < 1:
        raise ConfigError(
            f"ttl must be at least 1 second (etcd leases count whole seconds), got {ttl!r}"
        )


def _check_prefix(prefix: str) -> str:
    cleaned = prefix.strip("/") if isinstance(prefix, str) else ""
    if not cleaned:
        raise ConfigError(f"prefix must be a non-empty etcd key prefix, got {prefix!r}")
    return cleaned
