"""A tiered app for the worker suite: the same tests run with jobs moved through Redis Streams
by a partition leader in the test process (leadership from the static elector)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from chronoq import App
from chronoq.coordination import PartitionElector, StaticElector
from chronoq.observability.events import Observer, Observers
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.redis import RedisTimerStore, connect

PARTITIONS = 4


def tiered_app(pg_dsn: str, redis_url: str, prefix: str) -> App:
    return App(
        dsn=pg_dsn,
        dispatch="tiered",
        redis_url=redis_url,
        # Never reached: the leader of these tests is elected by the static elector.
        etcd_endpoints="http://127.0.0.1:2379",
        redis_prefix=prefix,
        partitions=PARTITIONS,
    )


@contextmanager
def leading(
    app: App,
    redis_url: str,
    elector: PartitionElector | None = None,
    observers: Iterable[Observer] = (),
    step_interval: float = 0.05,
    lease_ttl: float | None = None,
) -> Iterator[TierLeader]:
    """A partition leader for `app` on a thread until the block ends, elected by `elector`
    (default: the static elector, leading every partition); its events go to `observers`.
    `lease_ttl` defaults to the elector's own `ttl` (an etcd elector's), else 5 s."""
    chosen = elector or StaticElector("test-leader", app.config.partitions)
    timers = RedisTimerStore(connect(redis_url), prefix=app.config.redis_prefix)
    options = TierOptions(
        partitions=app.config.partitions,
        horizon=30.0,
        step_interval=step_interval,
        lease_ttl=lease_ttl or float(getattr(chosen, "ttl", 5.0)),
    )
    leader = TierLeader(app.runtime(), chosen, timers, options, Observers(observers))
    stop = threading.Event()
    failures: list[BaseException] = []

    def target() -> None:
        try:
            leader.run(stop)
        except BaseException as exc:  # surfaced to the test below
            failures.append(exc)

    thread = threading.Thread(target=target, name="test-tier-leader", daemon=True)
    thread.start()
    try:
        yield leader
    finally:
        stop.set()
        leader.wake()
        thread.join(timeout=10)
        chosen.close()
        timers.close()
        assert not thread.is_alive(), "tier leader did not stop"
        if failures:
            raise failures[0]


def app_by_dispatch(request: Any) -> Iterator[App]:
    """The body of an `app` fixture parametrised over "sqlite", "postgres" (db dispatch),
    "tiered" (PostgreSQL, a partition leader moving the jobs onto Redis Streams) and
    "tiered-cluster" (the same on a Redis Cluster: tests.services.redis_cluster)."""
    if request.param not in ("tiered", "tiered-cluster"):
        dsn = request.getfixturevalue("sqlite_dsn" if request.param == "sqlite" else "pg_dsn")
        with App(dsn) as application:
            yield application
        return
    if request.param == "tiered-cluster":
        redis_url = request.getfixturevalue("redis_cluster").url
        prefix = request.getfixturevalue("cluster_prefix")
    else:
        redis_url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")
    application = tiered_app(request.getfixturevalue("pg_dsn"), redis_url, prefix)
    with application, leading(application, redis_url):
        yield application
