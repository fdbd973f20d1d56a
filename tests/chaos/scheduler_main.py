"""A chaos scheduler process for tiered runs: `chronoq`'s Scheduler leading partitions, with its
lease rescuer every second (the workers' bound on re-running a killed worker's job counts on
it), appending every fenced write it makes to Redis to the run's JSONL history.

Each write is two lines: `tier_send` before the call and `tier_write` with the answer after it;
a take-over is one `tier_takeover` line written after Redis answered. Every process appends to
one file, so a take-over line that comes before a write's send line was recorded in Redis
before that write was sent: the checker reads stale writes from that order.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import IO, Any, TypeVar

from chronoq.observability.events import Observers
from chronoq.observability.logs import configure_logging
from chronoq.scheduler.runner import Scheduler, SchedulerOptions, default_holder_id
from chronoq.tier.ports import (
    Moved,
    PartitionLost,
    Staged,
    StaleEpoch,
    Takeover,
    Timer,
    TimerStore,
)
from chronoq.tier.wiring import open_leader
from tests.chaos.workload import app

T = TypeVar("T")
RESCUE_INTERVAL = 1.0


class WriteHistory:
    """Wraps a TimerStore's fenced calls with history lines (thread-safe: the stager and the
    mover write from two threads)."""

    def __init__(self, sink: IO[str], timers: TimerStore) -> None:
        self._sink = sink
        self._timers = timers
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._calls = itertools.count()

    def write(self, event: dict[str, Any]) -> None:
        with self._lock:
            line = {"pid": self._pid, "wall": time.time(), **event}
            self._sink.write(json.dumps(line) + "\n")
            self._sink.flush()

    def install(self) -> None:
        take_over, stage, move_due = (
            self._timers.take_over,
            self._timers.stage,
            self._timers.move_due,
        )

        def logged_take_over(partition: int, epoch: int, *, force: bool = False) -> Takeover:
            result = take_over(partition, epoch, force=force)
            self.write(
                {
                    "event": "tier_takeover",
                    "partition": partition,
                    "epoch": epoch,
                    "accepted": result.accepted,
                    "force": force,
                }
            )
            return result

        def logged_stage(partition: int, epoch: int, timers: Sequence[Timer]) -> Staged:
            return self._fenced("stage", partition, epoch, lambda: stage(partition, epoch, timers))

        def logged_move(partition: int, epoch: int, now_ms: int, limit: int) -> Moved:
            return self._fenced(
                "move", partition, epoch, lambda: move_due(partition, epoch, now_ms, limit)
            )

        self._timers.take_over = logged_take_over  # type: ignore[method-assign]
        self._timers.stage = logged_stage  # type: ignore[method-assign]
        self._timers.move_due = logged_move  # type: ignore[method-assign]

    def _fenced(self, op: str, partition: int, epoch: int, call: Callable[[], T]) -> T:
        ref = {"op": op, "partition": partition, "epoch": epoch, "call": next(self._calls)}
        self.write({"event": "tier_send", **ref})
        try:
            result = call()
        except StaleEpoch:
            self.write({"event": "tier_write", **ref, "result": "stale", "moved": 0})
            raise
        except PartitionLost:
            self.write({"event": "tier_write", **ref, "result": "lost", "moved": 0})
            raise
        except Exception:
            self.write({"event": "tier_write", **ref, "result": "error", "moved": 0})
            raise
        self.write({"event": "tier_write", **ref, **_answer(result)})
        return result


def _answer(result: object) -> dict[str, Any]:
    if isinstance(result, Moved):
        outcome = "stale" if result.stale else "lost" if result.lost else "ok"
        return {"result": outcome, "moved": result.moved}
    return {"result": "ok", "moved": 0}


def main() -> int:
    configure_logging("info", sys.stderr)
    with open(os.environ["CHAOS_HISTORY"], "a", encoding="utf-8") as sink:
        holder = default_holder_id()
        leader = open_leader(app.runtime(), holder, Observers(parent=app.observers))
        restage_after = os.environ.get("CHAOS_RESTAGE_AFTER")
        if restage_after:
            # A run lasts seconds: entries must be looked at again within it, not after 30 s.
            leader.stager.options = replace(leader.options, restage_after=float(restage_after))
        WriteHistory(sink, leader.timers).install()
        options = SchedulerOptions(lookahead=timedelta(seconds=2), rescue_interval=RESCUE_INTERVAL)
        try:
            Scheduler(app, options, holder=holder, tier=leader).run()
        finally:
            app.close()
    logging.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
