"""CPU time spent by processes, read from /proc: where a system's time per job goes.

The drain figure reads the worker processes (the client side) and the database server's
processes (PostgreSQL backends, or redis-server) before and after a drain, so every system is
charged for its whole cost, its database's included.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
SERVER_COMMANDS = frozenset({"postgres", "redis-server"})


def process_seconds(pid: int) -> float:
    """User plus system CPU seconds of one process (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # The command name is in parentheses and may contain spaces; fields follow the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(parent: int) -> list[int]:
    """The processes whose parent is `parent` now (not their own children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def processes_seconds(pids: Iterable[int]) -> float:
    return sum(process_seconds(pid) for pid in pids)


def server_seconds() -> dict[int, float]:
    """CPU seconds of every database server process now running, by pid."""
    seconds = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if command in SERVER_COMMANDS:
            seconds[int(entry.name)] = process_seconds(int(entry.name))
    return seconds


def server_seconds_since(before: dict[int, float]) -> float:
    """Server CPU used since `before`, counting backends that started in between from zero.
    Backends that exited in between are lost, which is why it is read before workers stop."""
    now = server_seconds()
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in now.items())
