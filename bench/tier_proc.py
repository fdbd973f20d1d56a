"""Figure 8's processes: `python -m bench.tier_proc ROLE SPEC_JSON`.

- `worker`: one chronoq `Worker` of an async no-op task, in db or tiered dispatch.
- `leader`: one tier partition leader (`TierLeader`), elected by the static elector (it leads
  every partition) or by etcd; it prints `lead P EPOCH` when it gains partition P and
  `lost P WHY` when it stops leading it, and `moved COUNT LATE` for every move.lua call (LATE:
  seconds from the earliest of its timers falling due to the move, on the database clock).
- `idle`: imports once, then forks `count` workers (import time is the same for every child, and
  forking spares two cores a minute of interpreter start-ups); it forwards SIGTERM to them.

Each prints `ready` once built (an idle spawner: once per child), waits for a line on stdin
(not `idle`), then runs until SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from chronoq import App
from chronoq.coordination import PartitionElector, StaticElector
from chronoq.observability.events import (
    Observers,
    PartitionLeaderChanged,
    Subscription,
    TimersMoved,
)
from chronoq.tier.etcd.elector import EtcdElector
from chronoq.tier.leader import TierLeader
from chronoq.tier.options import TierOptions
from chronoq.tier.redis import RedisTimerStore, connect
from chronoq.worker.worker import Worker, WorkerOptions

PREFIX = "chronoq-bench"
UNUSED_ETCD = "http://127.0.0.1:2379"  # tiered workers never reach etcd


@dataclass(frozen=True)
class Spec:
    """What a figure 8 process runs against and how."""

    dsn: str
    redis_url: str
    dispatch: str = "db"
    partitions: int = 4
    concurrency: int = 100
    batch: int = 100
    pool_size: int = 4
    horizon: float = 10.0
    move_batch: int = 1000
    etcd: str = ""  # a leader elected in etcd; empty: the static elector
    leader_ttl: float = 2.0
    holder: str = "bench-leader"
    count: int = 1  # idle: how many workers to fork

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def build_app(spec: Spec) -> App:
    settings: dict[str, Any] = {"dispatch": spec.dispatch, "pool_size": spec.pool_size}
    if spec.dispatch == "tiered":
        settings |= {
            "redis_url": spec.redis_url,
            "etcd_endpoints": spec.etcd or UNUSED_ETCD,
            "partitions": spec.partitions,
            "stage_horizon": spec.horizon,
            "redis_prefix": PREFIX,
            "leader_ttl": spec.leader_ttl,
        }
    app = App(spec.dsn, **settings)

    @app.task(max_attempts=3)
    async def noop() -> None:
        pass

    return app


def build_leader(app: App, spec: Spec, events: Observers) -> TierLeader:
    elector: PartitionElector
    if spec.etcd:
        elector = EtcdElector(
            [spec.etcd], spec.holder, spec.partitions, ttl=spec.leader_ttl, prefix=PREFIX
        )
    else:
        elector = StaticElector(spec.holder, spec.partitions)
    timers = RedisTimerStore(connect(spec.redis_url), prefix=PREFIX)
    options = TierOptions(
        partitions=spec.partitions,
        horizon=spec.horizon,
        step_interval=min(0.5, spec.leader_ttl / 10),
        move_batch=spec.move_batch,
    )
    return TierLeader(app.runtime(), elector, timers, options, events)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _announce(event: PartitionLeaderChanged) -> None:
    if event.epoch is not None:
        _say(f"lead {event.partition} {event.epoch}")
    else:
        _say(f"lost {event.partition} {event.why or '-'}")


def run_worker(spec: Spec, wait: bool = True) -> None:
    app = build_app(spec)
    options = WorkerOptions(concurrency=spec.concurrency, batch_size=spec.batch, tune_gc=True)
    worker = Worker(app, options)  # the collector tuned at start, as `chronoq worker` runs it
    _say("ready")
    if wait:
        sys.stdin.readline()
    worker.run()


def run_leader(spec: Spec) -> None:
    app = build_app(spec)
    events = Observers([_Announcer()])
    leader = build_leader(app, spec, events)
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop.set()
        leader.wake()

    signal.signal(signal.SIGTERM, request_stop)
    _say("ready")
    sys.stdin.readline()
    leader.run(stop)


def _moved(event: TimersMoved) -> None:
    _say(f"moved {event.count} {event.late:.6f}")


class _Announcer:
    def subscriptions(self) -> list[Subscription[Any]]:
        return [Subscription(PartitionLeaderChanged, _announce), Subscription(TimersMoved, _moved)]


def run_idle(spec: Spec) -> None:
    children = []
    for _ in range(spec.count):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                run_worker(spec, wait=False)
            finally:
                os._exit(0)
        children.append(pid)

    def forward(signum: int, frame: object) -> None:
        for child in children:
            os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    for child in children:
        os.waitpid(child, 0)


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    role, spec_json = argv
    spec = Spec(**json.loads(spec_json))
    {"worker": run_worker, "leader": run_leader, "idle": run_idle}[role](spec)


if __name__ == "__main__":
    main(sys.argv[1:])
