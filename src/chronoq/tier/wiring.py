"""Builds the parts of tiered dispatch from an app's settings, with one clear error each.

Everything that can be wrong with a tiered setup is found here, at start, in one line: the store
is not PostgreSQL, Redis or etcd is missing or unreachable, the partition count differs from the
one the store was first run with, a worker serves a queue whose limits tiered dispatch does not
carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from chronoq.errors import ConfigError, CoordinationUnavailable
from chronoq.tier.etcd.access import EtcdAccess
from chronoq.tier.etcd.elector import EtcdElector
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect

if TYPE_CHECKING:
    from chronoq.coordination.base import PartitionLeader
    from chronoq.observability.events import Observers
    from chronoq.runtime import Runtime
    from chronoq.storage.base import QueueLimitParams


def is_tiered(runtime: Runtime) -> bool:
    return runtime.config.dispatch == "tiered"


def partition_count(runtime: Runtime) -> int:
    """The store's partition count, fixed at the first tiered start; a different setting is
    refused rather than followed (jobs would be staged by the wrong leaders)."""
    stored = runtime.store.tier_partitions(runtime.config.partitions)
    if stored != runtime.config.partitions:
        raise ConfigError(
            f"the store's tiered dispatch has {stored} partitions (fixed at its first tiered "
            f"start), but the setting 'partitions' is {runtime.config.partitions}: set "
            f"CHRONOQ_PARTITIONS={stored}, or repartition offline (docs/tier.md)"
        )
    return stored


def open_timer_store(runtime: Runtime) -> RedisTimerStore:
    return RedisTimerStore(connect(runtime.config.redis_url), prefix=runtime.config.redis_prefix)


def open_leader(runtime: Runtime, holder: str, events: Observers) -> TierLeader:
    partitions = partition_count(runtime)
    timers = open_timer_store(runtime)
    elector = EtcdElector(
        _endpoints(runtime),
        holder,
        partitions,
        ttl=runtime.config.leader_ttl,
        prefix=runtime.config.redis_prefix,
        access=_etcd_access(runtime),
    )
    try:
        # One clear line at start when etcd cannot be reached or refuses the user (a wrong
        # password, no permission to read or write the prefix), rather than a scheduler that
        # stands by forever without saying why.
        elector.check()
    except (CoordinationUnavailable, ConfigError):
        elector.close()
        timers.close()
        raise
    return TierLeader(
        runtime, elector, timers, TierOptions.from_config(runtime.config, partitions), events
    )


def open_reader(runtime: Runtime, queues: Sequence[str], consumer: str) -> RedisStreamReader:
    check_queues(runtime, queues)
    return RedisStreamReader(
        connect(runtime.config.redis_url),
        runtime.config.redis_prefix,
        list(queues),
        partition_count(runtime),
        consumer,
    )


def check_queues(runtime: Runtime, queues: Sequence[str]) -> None:
    """Limits (rate, concurrency, per key) are enforced by the database claim only, so their
    queues stay on it: a tiered worker refuses them rather than never running their jobs."""
    stored = {q.name for q in runtime.store.queue_list() if q.limited}
    declared = {name for name, limit in runtime.limits.items() if _limits(limit)}
    declared |= {queue for queue, _ in runtime.key_limits}
    limited = sorted((stored | declared) & set(queues))
    if limited:
        names = ", ".join(limited)
        raise ConfigError(
            f"queue {names} has limits, which tiered dispatch does not carry: serve it with a "
            f"db-dispatch worker (CHRONOQ_DISPATCH=db chronoq worker --queue ...), and the "
            f"other queues with tiered workers"
        )


def _endpoints(runtime: Runtime) -> list[str]:
    return [e.strip() for e in runtime.config.etcd_endpoints.split(",") if e.strip()]


def _etcd_access(runtime: Runtime) -> EtcdAccess:
    config = runtime.config
    return EtcdAccess(
        username=config.etcd_username,
        password=config.etcd_password,
        ca_file=config.etcd_ca_file,
        cert_file=config.etcd_cert_file,
        key_file=config.etcd_key_file,
    )


def read_leaders(runtime: Runtime) -> tuple[list[PartitionLeader], list[str]]:
    """The partitions' leaders and the live schedulers, read without campaigning."""
    elector = EtcdElector(
        _endpoints(runtime),
        "chronoq-status-reader",
        partition_count(runtime),
        ttl=runtime.config.leader_ttl,
        prefix=runtime.config.redis_prefix,
        access=_etcd_access(runtime),
    )
    try:
        return elector.leaders(), elector.members()
    finally:
        elector.close()


def _limits(limit: QueueLimitParams) -> bool:
    return limit.rate is not None or limit.concurrency is not None
