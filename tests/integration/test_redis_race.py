"""Two leaders of one partition racing, an old epoch and a new one, each on its own connection:
only the current epoch moves, and every timer reaches the stream exactly once."""

from __future__ import annotations

import threading
from collections import Counter

import redis

from chronoq.tier.ports import Moved, Timer
from chronoq.tier.redis import RedisTimerStore, connect, partition_keys

NOW = 1_800_000_000_000
TIMERS = 2_000
BATCH = 10  # small batches: many calls of the two leaders interleave


def test_two_epochs_racing_move_each_timer_once_and_only_the_current_one_moves(
    redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    old, new = (RedisTimerStore(connect(redis_url), redis_prefix) for _ in range(2))
    assert old.take_over(0, 1).accepted
    old.stage(0, 1, [Timer(job_id, 1, "q", NOW - job_id) for job_id in range(TIMERS)])
    old_moves: list[Moved] = []
    new_moves: list[Moved] = []
    old_started, new_starting = threading.Event(), threading.Event()

    def old_leader() -> None:
        """Moves until it is fenced off, as a paused leader that woke up would."""
        while not (moved := old.move_due(0, 1, NOW, BATCH)).stale:
            old_moves.append(moved)
            if not old_started.is_set():
                old_started.set()
                # From here on both run: one take-over call against 199 more moves.
                new_starting.wait(timeout=10)
        old_moves.append(moved)

    def new_leader() -> None:
        old_started.wait(timeout=10)
        new_starting.set()
        assert new.take_over(0, 2).accepted
        while (moved := new.move_due(0, 2, NOW, BATCH)).moved:
            new_moves.append(moved)

    threads = [threading.Thread(target=old_leader), threading.Thread(target=new_leader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)

    stream = partition_keys(redis_prefix, 0).stream("q")
    entries = redis_client.xrange(stream) or []
    jobs = Counter(int(fields[b"job"]) for _, fields in entries if fields)
    assert jobs == Counter(range(TIMERS))  # none moved twice, none lost
    assert sum(m.moved for m in old_moves + new_moves) == TIMERS
    assert old_moves[-1].stale and all(not m.stale for m in old_moves[:-1])
    assert old.move_due(0, 1, NOW, BATCH).stale  # and it stays fenced off
    assert old_moves[0].moved == BATCH and new_moves  # both really moved: it was a race
    old.close()
    new.close()
