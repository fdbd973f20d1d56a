"""`python -m bench.tier_redis`: how fast the Redis timer tier moves and hands out due timers.

Three probes on one Redis, each repeated (median and range, as the suite reports figures):

- move: timers/s moved by `RedisTimerStore.move_due` (one fenced move.lua call each) at a batch
  limit of 1, 100 and 1,000, all timers due, from one process; staging them is not timed.
- consume: entries/s read and acknowledged by `RedisStreamReader` at COUNT 1 and 100 over the
  streams of 4 partitions (read, then one XACK pipeline per batch).
- wake-up: from the move.lua call that XADDs to the return of a reader blocked in XREADGROUP on
  another connection, in milliseconds (median and p99 of the samples).

Not part of `make bench` (it compares peers, and no peer has this tier) nor of the tests. The
keys live under a prefix of their own in CHRONOQ_BENCH_REDIS (default db 14) and are deleted
afterwards.

    .venv/bin/python -m bench.tier_redis [--timers 100000] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from redis.utils import HIREDIS_AVAILABLE

from bench.stats import percentile, summary
from chronoq.tier.ports import Delivery, Timer
from chronoq.tier.redis import STAGE_BATCH, RedisStreamReader, RedisTimerStore, connect

NOW = 1_800_000_000_000
PARTITIONS = 4
MOVE_BATCHES = (1, 100, 1_000)
READ_COUNTS = (1, 100)


@contextmanager
def tier(url: str) -> Iterator[tuple[RedisTimerStore, str]]:
    """A timer store on a prefix of its own, every partition taken over at epoch 1."""
    prefix = f"chronoq-bench-{uuid.uuid4().hex[:8]}"
    store = RedisTimerStore(connect(url), prefix)
    for partition in range(PARTITIONS):
        store.take_over(partition, 1)
    try:
        yield store, prefix
    finally:
        for key in store.client.scan_iter(match=f"{prefix}:*", count=1000):
            store.client.delete(key)
        store.close()


def stage_due(store: RedisTimerStore, timers: int, partitions: int = 1) -> None:
    for partition in range(partitions):
        due = [Timer(i, 1, "q", NOW - i) for i in range(partition, timers, partitions)]
        for start in range(0, len(due), STAGE_BATCH):
            store.stage(partition, 1, due[start : start + STAGE_BATCH])


def move_rate(url: str, timers: int, batch: int) -> float:
    with tier(url) as (store, _prefix):
        stage_due(store, timers)
        started = time.perf_counter()
        moved = 0
        while step := store.move_due(0, 1, NOW, batch).moved:
            moved += step
        elapsed = time.perf_counter() - started
    assert moved == timers, f"moved {moved} of {timers}"
    return timers / elapsed


def consume_rate(url: str, timers: int, count: int) -> float:
    with tier(url) as (store, prefix):
        reader = RedisStreamReader(connect(url), prefix, ["q"], PARTITIONS, "bench")
        stage_due(store, timers, PARTITIONS)
        for partition in range(PARTITIONS):
            while store.move_due(partition, 1, NOW, 1_000).moved:
                pass
        started = time.perf_counter()
        consumed = 0
        while batch := reader.read(count, 0):
            reader.ack(batch)
            consumed += len(batch)
        elapsed = time.perf_counter() - started
        reader.close()
    assert consumed == timers, f"consumed {consumed} of {timers}"
    return timers / elapsed


def wakeup_ms(url: str, samples: int) -> list[float]:
    latencies: list[float] = []
    with tier(url) as (store, prefix):
        name = f"{prefix}-sleeper"
        reader = RedisStreamReader(connect(url, name=name), prefix, ["q"], PARTITIONS, "sleeper")
        for job_id in range(samples):
            latencies.append(_one_wakeup(store, reader, name, job_id))
        reader.close()
    return latencies


def _one_wakeup(store: RedisTimerStore, reader: RedisStreamReader, name: str, job: int) -> float:
    woke: list[tuple[float, list[Delivery]]] = []

    def read() -> None:
        got = reader.read(10, 5.0)
        woke.append((time.perf_counter(), got))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    _until(lambda: _blocked(store.client, name))
    store.stage(job % PARTITIONS, 1, [Timer(job, 1, "q", NOW)])
    moved_at = time.perf_counter()
    store.move_due(job % PARTITIONS, 1, NOW, 10)
    thread.join(timeout=10)
    [(woke_at, got)] = woke
    reader.ack(got)
    return (woke_at - moved_at) * 1000


def _blocked(client: redis.Redis, name: str) -> bool:
    return any(c["name"] == name and c["cmd"] == "xreadgroup" for c in client.client_list())


def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the reader never blocked")
        pause.wait(0.001)


def measure(url: str, timers: int, repeats: int, samples: int) -> dict[str, Any]:
    rows: dict[str, Any] = {"hiredis": HIREDIS_AVAILABLE, "timers": timers}
    for batch in MOVE_BATCHES:
        count = timers if batch > 1 else max(1, timers // 10)  # 1 a call: one round trip each
        rows[f"move_batch_{batch}"] = summary(
            [move_rate(url, count, batch) for _ in range(repeats)]
        )
    for count in READ_COUNTS:
        n = timers if count > 1 else max(1, timers // 10)
        rows[f"consume_count_{count}"] = summary(
            [consume_rate(url, n, count) for _ in range(repeats)]
        )
    latencies = sorted(wakeup_ms(url, samples))
    rows["wakeup_ms"] = {
        "samples": samples,
        "median": round(percentile(latencies, 0.5), 3),
        "p99": round(percentile(latencies, 0.99), 3),
        "max": round(latencies[-1], 3),
    }
    return rows


def render(rows: dict[str, Any]) -> str:
    lines = [
        f"timers per probe: {rows['timers']:,} (batch 1 and COUNT 1: a tenth); "
        f"hiredis: {rows['hiredis']}",
        "",
        "| probe | median /s | range /s |",
        "|---|---|---|",
    ]
    for key, value in rows.items():
        if key.startswith(("move_", "consume_")):
            lines.append(
                f"| {key.replace('_', ' ')} | {value['median']:,.0f} |"
                f" {value['min']:,.0f} – {value['max']:,.0f} |"
            )
    wake = rows["wakeup_ms"]
    lines += [
        "",
        f"wake-up after a move ({wake['samples']} samples): median {wake['median']} ms,"
        f" p99 {wake['p99']} ms, max {wake['max']} ms",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tier_redis", description=__doc__)
    parser.add_argument(
        "--redis-url", default=os.environ.get("CHRONOQ_BENCH_REDIS", "redis://127.0.0.1:6379/14")
    )
    parser.add_argument("--timers", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wakeups", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    rows = measure(args.redis_url, args.timers, args.repeats, args.wakeups)
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
