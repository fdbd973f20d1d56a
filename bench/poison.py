"""The poison figure's arithmetic: when the poison jobs fall due, whether each one ended as it
must, and what the supervisor's log says about the worker processes they took down.

Poison jobs fall due at even intervals across a window (the drain time of the same repeat's run
without them), the hang jobs spread evenly among the exit_hard ones. Each must end `dead` at
exactly its max_attempts, with one error record per attempt. The supervisor logs every child's
death (`worker process 0 (pid 123) exited with code 3`), the replacement it starts (`started
worker process 0 (pid 456)`), and the replacement logs when it serves (`[456]: worker ...
serving`); from these come the deaths by kind and how long each slot was empty. Everything here
is pure, so a test can pin it.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

EXIT_RETIRED = 75  # a worker retired because a sync handler ran past its timeout
# How a child ends when the harness stops the supervisor: cleanly, or by the forwarded signal
# when it was still starting (SIGINT through KeyboardInterrupt is 130).
STOPPED = frozenset({0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGINT})

_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+\s+\S+ \[(?P<pid>\d+)\]: (?P<message>.*)$",
    re.MULTILINE,
)
_STARTED = re.compile(r"^started worker process (?P<slot>\d+) \(pid (?P<pid>\d+)\)$")
_EXITED = re.compile(
    r"^worker process (?P<slot>\d+) \(pid (?P<pid>\d+)\) "
    r"(?:exited with code (?P<code>\d+)|was killed by (?P<signal>\w+))$"
)
_SERVING = re.compile(r"^worker \S+ serving ")
_GAVE_UP = re.compile(r"giving up$")


def schedule(exit_hard: int, hang: int, window_s: float) -> list[tuple[float, str]]:
    """(seconds after the drain's start, task) for every poison job: one in the middle of each
    of `exit_hard + hang` equal slices of the window, a hang job in every slice where the
    running share of hangs reaches a new whole number."""
    total = exit_hard + hang
    return [
        (
            window_s * (i + 0.5) / total,
            "hang" if (i + 1) * hang // total > i * hang // total else "exit_hard",
        )
        for i in range(total)
    ]


@dataclass(frozen=True)
class PoisonJob:
    """One poison job as the database left it."""

    id: int
    task: str
    status: str
    attempts: int
    max_attempts: int | None
    errors: list[dict[str, Any]]


def poison_problems(jobs: Sequence[PoisonJob], max_attempts: int, expected: int) -> list[str]:
    """Every way the poison jobs did not end as they must: all `expected` of them dead at
    exactly `max_attempts`, with one error per attempt, each a retry but the last. Empty when
    all is well."""
    problems = []
    if len(jobs) != expected:
        problems.append(f"{len(jobs)} poison jobs in the database, {expected} enqueued")
    for job in jobs:
        outcomes = [str(e.get("outcome")) for e in job.errors]
        wanted = ["retry"] * (max_attempts - 1) + ["dead"]
        if (job.status, job.attempts, job.max_attempts) != ("dead", max_attempts, max_attempts):
            problems.append(
                f"job {job.id} ({job.task}) is {job.status} after {job.attempts} of "
                f"{job.max_attempts} attempts, not dead after {max_attempts}"
            )
        elif outcomes != wanted:
            problems.append(f"job {job.id} ({job.task}) has error outcomes {outcomes}")
    return problems


def dead_at(jobs: Iterable[PoisonJob], max_attempts: int) -> int:
    """The jobs that ended dead at exactly `max_attempts`, as they all must."""
    return sum(
        1
        for job in jobs
        if (job.status, job.attempts, job.max_attempts) == ("dead", max_attempts, max_attempts)
    )


def error_kinds(jobs: Iterable[PoisonJob]) -> dict[str, dict[str, int]]:
    """How each poison task's attempts ended: {"hang": {"chronoq.errors.JobTimeout": 14, ...}}."""
    kinds: dict[str, Counter[str]] = {}
    for job in jobs:
        kinds.setdefault(job.task, Counter()).update(str(e.get("error")) for e in job.errors)
    return {task: dict(sorted(counts.items())) for task, counts in sorted(kinds.items())}


@dataclass(frozen=True)
class Death:
    """A worker process the supervisor saw die, and when its slot served again."""

    slot: int
    pid: int
    code: int  # negative: killed by that signal
    at: float  # epoch seconds of the supervisor's log line
    back_at: float | None  # the replacement's first "serving" line; None if never replaced

    @property
    def retired(self) -> bool:
        return self.code == EXIT_RETIRED


@dataclass(frozen=True)
class SupervisorLog:
    """What one run's log says: the deaths that were not the harness stopping the workers, and
    whether the supervisor gave up on a slot."""

    deaths: list[Death]
    gave_up: bool

    @property
    def crashed(self) -> int:
        return sum(1 for d in self.deaths if not d.retired)

    @property
    def retired(self) -> int:
        return sum(1 for d in self.deaths if d.retired)

    def down_s(self) -> list[float]:
        """Seconds each replaced slot stood empty: from the supervisor logging the death to the
        new process logging that it serves."""
        return [d.back_at - d.at for d in self.deaths if d.back_at is not None]

    def down_within(self, start: float, end: float) -> float:
        """Process-seconds the slots stood empty inside [start, end] (a slot never refilled is
        empty to the end)."""
        total = 0.0
        for death in self.deaths:
            back = end if death.back_at is None else death.back_at
            total += max(0.0, min(back, end) - max(death.at, start))
        return total


def parse_log(text: str) -> SupervisorLog:
    """The deaths in a supervisor's log (with its children's lines in it), in order."""
    serving: dict[int, float] = {}  # pid → its first "serving" line
    started: list[tuple[float, int, int]] = []  # (at, slot, pid)
    exits: list[tuple[float, int, int, int]] = []  # (at, slot, pid, code)
    gave_up = False
    for line in _LINE.finditer(text):
        at, message = _epoch(line["at"]), line["message"]
        if _SERVING.match(message):
            serving.setdefault(int(line["pid"]), at)
        elif found := _STARTED.match(message):
            started.append((at, int(found["slot"]), int(found["pid"])))
        elif found := _EXITED.match(message):
            code = (
                int(found["code"])
                if found["code"] is not None
                else -signal.Signals[found["signal"]].value
            )
            exits.append((at, int(found["slot"]), int(found["pid"]), code))
        elif _GAVE_UP.search(message):
            gave_up = True
    deaths = []
    for at, slot, pid, code in exits:
        if code in STOPPED:
            continue
        replacement = next((p for t, s, p in started if s == slot and t >= at and p != pid), None)
        back_at = serving.get(replacement) if replacement is not None else None
        deaths.append(Death(slot, pid, code, at, back_at))
    return SupervisorLog(deaths, gave_up)


def _epoch(stamp: str) -> float:
    """`2026-01-01 09:00:00,123` in the local time zone (logging's asctime) → epoch seconds."""
    whole, millis = stamp.split(",")
    return time.mktime(time.strptime(whole, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
