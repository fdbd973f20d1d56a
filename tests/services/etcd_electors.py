"""Electors stepping as a scheduler loop would, recorded so tests can wait on and check what they
claimed: in a thread of the test process, or in a child process that a test can SIGKILL or
SIGSTOP (`python -m tests.services.etcd_electors ...` runs the child's loop).

Every step is recorded with when it started and returned (time.monotonic(), which is the same
clock in every process of the machine on Linux), so a checker can tell whether two holders ever
both claimed a partition at the same instant. A claim of step k lasts from its return until the
holder's next step returns or its trust window ends, whichever comes first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from chronoq.coordination import Leadership, PartitionElector
from chronoq.tier.etcd import EtcdElector

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Step:
    holder: str
    started: float
    returned: float
    led: dict[int, tuple[int, float]]  # partition -> (epoch, trusted_until)

    @classmethod
    def of(cls, holder: str, started: float, led: dict[int, Leadership]) -> Step:
        claims = {p: (lead.epoch, lead.trusted_until) for p, lead in led.items()}
        return cls(holder, started, time.monotonic(), claims)


@dataclass
class StepLog:
    """Every step of every elector of a test, in the order they were recorded."""

    steps: list[Step] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, step: Step) -> None:
        with self.changed:
            self.steps.append(step)
            self.changed.notify_all()

    def of(self, holder: str) -> list[Step]:
        with self.changed:
            return [s for s in self.steps if s.holder == holder]

    def latest(self, holder: str) -> Step | None:
        mine = self.of(holder)
        return mine[-1] if mine else None

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until `predicate` holds (checked at each new step); when it first did."""
        with self.changed:
            if not self.changed.wait_for(predicate, timeout):
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            return time.monotonic()

    def led(self, holder: str) -> dict[int, int]:
        """What `holder`'s latest step led: partition -> epoch."""
        step = self.latest(holder)
        return {p: epoch for p, (epoch, _) in step.led.items()} if step else {}


def balanced(log: StepLog, holders: Sequence[str], partitions: int) -> bool:
    """The holders' latest steps split every partition between them, evenly within one."""
    sets = [set(log.led(holder)) for holder in holders]
    sizes = [len(s) for s in sets]
    union = set().union(*sets)
    return sum(sizes) == partitions == len(union) and max(sizes) - min(sizes) <= 1


def check_no_overlap(steps: Iterable[Step]) -> None:
    """No two holders claimed one partition at the same instant, and a partition's epoch only
    grew, strictly at each change of holder."""
    claims: dict[int, list[tuple[float, float, str, int]]] = defaultdict(list)
    by_holder: dict[str, list[Step]] = defaultdict(list)
    for step in steps:
        by_holder[step.holder].append(step)
    for holder, mine in by_holder.items():
        for step, after in zip(mine, [*mine[1:], None], strict=True):
            for partition, (epoch, trusted_until) in step.led.items():
                end = trusted_until if after is None else min(trusted_until, after.returned)
                claims[partition].append((step.returned, end, holder, epoch))
    for partition, spans in claims.items():
        _check_partition(partition, sorted(spans))


def _check_partition(partition: int, spans: list[tuple[float, float, str, int]]) -> None:
    latest_end: dict[str, float] = {}
    previous: tuple[str, int] | None = None
    for start, end, holder, epoch in spans:
        for other, other_end in latest_end.items():
            assert other == holder or other_end <= start, (
                f"partition {partition}: {holder} claimed it at {start:.3f} while {other}"
                f" still did until {other_end:.3f}"
            )
        if previous is not None:
            before_holder, before_epoch = previous
            assert epoch >= before_epoch, f"partition {partition}: epoch fell to {epoch}"
            assert holder == before_holder or epoch > before_epoch, (
                f"partition {partition}: {holder} took it over from {before_holder} under the"
                f" same epoch {epoch}"
            )
        latest_end[holder] = max(end, latest_end.get(holder, end))
        previous = (holder, epoch)


class ElectorLoop:
    """An elector stepping every `interval` seconds on a thread of this process."""

    def __init__(self, elector: PartitionElector, log: StepLog, interval: float) -> None:
        self.elector = elector
        self._log = log
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"elector-{elector.holder}")
        self._errors: list[BaseException] = []

    def start(self) -> ElectorLoop:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop stepping and close the elector (recorded as a step that leads nothing)."""
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), f"the loop of {self.elector.holder} did not stop"
        started = time.monotonic()
        self.elector.close()
        self._log.add(Step(self.elector.holder, started, started, {}))
        if self._errors:
            raise self._errors[0]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                self._log.add(Step.of(self.elector.holder, started, self.elector.step()))
                self._stop.wait(self._interval)
        except BaseException as exc:  # surfaced by close()
            self._errors.append(exc)


class ElectorProcess:
    """An `EtcdElector` stepping in a child process, its steps read into `log`."""

    def __init__(
        self,
        log: StepLog,
        endpoints: Sequence[str],
        holder: str,
        partitions: int,
        ttl: float,
        prefix: str,
        interval: float,
    ) -> None:
        self.holder = holder
        self._log = log
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        argv = [
            *("--endpoints", ",".join(endpoints), "--holder", holder),
            *("--partitions", str(partitions), "--ttl", str(ttl)),
            *("--prefix", prefix, "--interval", str(interval)),
        ]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.services.etcd_electors", *argv],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._reader = threading.Thread(target=self._read, name=f"child-{holder}", daemon=True)
        self._reader.start()

    def kill(self) -> float:
        """SIGKILL the child; when it was sent."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        return sent

    def stop(self) -> float:
        sent = time.monotonic()
        self.process.send_signal(signal.SIGSTOP)
        return sent

    def cont(self) -> float:
        sent = time.monotonic()
        self.process.send_signal(signal.SIGCONT)
        return sent

    def close(self) -> None:
        """End the child if it still runs (closing its stdin makes it close its elector)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self._close_pipe(self.process.stdin)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(timeout=10)
        self._close_pipe(self.process.stdin)
        self._close_pipe(self.process.stdout)
        self._stderr.close()

    def stderr(self) -> str:
        """What the child wrote on stderr so far (its warnings, or a traceback)."""
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    @staticmethod
    def _close_pipe(pipe: IO[bytes] | None) -> None:
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            record = json.loads(line)
            led = {int(p): (int(e), float(t)) for p, (e, t) in record["led"].items()}
            self._log.add(Step(self.holder, record["started"], record["returned"], led))


def _child_main(argv: list[str]) -> None:
    """The child's loop: one JSON line per step on stdout, until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m tests.services.etcd_electors")
    for name in ("endpoints", "holder", "prefix"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("--interval", type=float, required=True)
    args = parser.parse_args(argv)
    elector = EtcdElector(
        args.endpoints.split(","), args.holder, args.partitions, args.ttl, args.prefix
    )
    done = threading.Event()

    def wait_for_stdin_to_close() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
    while not done.is_set():
        started = time.monotonic()
        led = elector.step()
        claims = {p: [lead.epoch, lead.trusted_until] for p, lead in led.items()}
        line = {"started": started, "returned": time.monotonic(), "led": claims}
        print(json.dumps(line), flush=True)
        done.wait(args.interval)
    elector.close()


if __name__ == "__main__":
    _child_main(sys.argv[1:])
