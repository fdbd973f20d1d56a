"""Run several worker processes and keep them running.

```
 chronoq worker --processes 3 ...                  the supervisor: runs no jobs itself
   ├── python -m chronoq worker ... --processes 1  slot 0
   ├── python -m chronoq worker ... --processes 1  slot 1
   └── python -m chronoq worker ... --processes 1  slot 2
```

- A child that exits 0 has finished (burst mode found nothing due, or it was told to stop); its
  slot stays empty.
- A child that dies with another code or by a signal is restarted after a short exponential
  backoff. A child that crashes more than `max_restarts` times within `restart_window` seconds
  is given up on: the supervisor stops the others and exits 1, because restarting a process that
  dies at once only hides the cause.
- Exit code 2 means a usage or configuration error; a restart would fail the same way, so the
  supervisor stops everything and exits 2.
- Exit code 75 (`EX_TEMPFAIL`) means the child retired on purpose, because a job's thread ran
  past its timeout and cannot be stopped: it is replaced at once and not counted as a crash.
- With `on_orphans`, each child tells the supervisor through a pipe which jobs it holds (see
  `chronoq.worker.ledger`). When a child dies holding jobs, `on_orphans` is called with them, in
  a thread of its own. A death while handlers ran is charged to those jobs' attempts, not to the
  crash budget, so a poison job ends dead at its max_attempts instead of taking the supervisor
  down; the child is restarted after `EXCUSED_RESTART_DELAY`.
- SIGTERM and SIGINT are forwarded to every child, and so is a second one (which makes workers
  stop at once); the supervisor then waits for all children. Children run in their own process
  group, so Ctrl-C in a terminal reaches them once, through the supervisor, not twice.
- Children find the supervisor's pid in `CHRONOQ_SUPERVISOR_PID` and stop gracefully when it
  disappears, so a supervisor killed with SIGKILL leaves no orphans running. They find their
  slot number in `CHRONOQ_WORKER_SLOT` (a restarted child keeps its slot's).

Exit status of `run()`: 0 when every child's last exit was clean, 2 after a configuration error,
1 otherwise.

The supervisor waits on one queue that carries both "child exited" (from one waiter thread per
child) and "signal received" events; `queue.SimpleQueue.put` is reentrant, which makes it safe to
call from a signal handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from chronoq.errors import ConfigError
from chronoq.worker.ledger import LEDGER_FD_ENV, LedgerReader, Orphans, describe_exit, signal_name

log = logging.getLogger("chronoq.supervisor")

SUPERVISOR_PID_ENV = "CHRONOQ_SUPERVISOR_PID"
# Each child's slot number (0 to processes - 1), so that it can take a port of its own.
WORKER_SLOT_ENV = "CHRONOQ_WORKER_SLOT"
EXIT_CONFIG = 2
EXIT_RETIRED = os.EX_TEMPFAIL
# The pause before replacing a child whose death its jobs paid for: no backoff, since the next
# child does not meet the same fate unless it claims the same job, which its retry delays.
EXCUSED_RESTART_DELAY = 0.1
# How long a dead child's pipe may take to deliver its last lines (its own descendants do not
# inherit the pipe, so the end of file comes with the child's death).
LEDGER_DRAIN_SECONDS = 5.0
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How a child may end when the supervisor forwarded a stop signal before the child's own
# handlers were installed: killed by it, or (SIGINT) through KeyboardInterrupt → exit 130.
_STOPPED_BY_SIGNAL = frozenset({-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGINT})


@dataclass(frozen=True, slots=True)
class SupervisorOptions:
    processes: int
    max_restarts: int = 5
    restart_window: float = 60.0
    backoff_base: float = 0.5
    backoff_cap: float = 5.0

    def validated(self) -> SupervisorOptions:
        if self.processes < 1:
            raise ConfigError(f"processes must be at least 1, got {self.processes}")
        if self.max_restarts < 0:
            raise ConfigError(f"max_restarts must not be negative, got {self.max_restarts}")
        for name in ("restart_window", "backoff_base", "backoff_cap"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive seconds, got {getattr(self, name)}")
        return self


class SupervisorSignals:
    """Hooks the supervisor calls; no-ops in production, events in tests."""

    def started(self, slot: int, pid: int) -> None:
        """A child process was started in `slot`."""

    def exited(self, slot: int, pid: int, code: int) -> None:
        """A child exited; `code` is negative when a signal killed it."""

    def orphans_settled(self, slot: int, orphans: Orphans) -> None:
        """`on_orphans` returned for the jobs a dead child held."""


OrphanHandler = Callable[[Orphans], None]


@dataclass(eq=False)
class _Slot:
    number: int
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    last_code: int | None = None
    # The last death was not the process's fault (see _on_exit): it counts as a clean end.
    excused: bool = False
    crashes: deque[float] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class _ChildExited:
    slot: _Slot
    process: subprocess.Popen[bytes]
    code: int
    orphans: Orphans | None = None


@dataclass(frozen=True, slots=True)
class _SignalReceived:
    signum: int


_Event = _ChildExited | _SignalReceived
_SignalHandler = Callable[[int, FrameType | None], Any] | int | None


class Supervisor:
    """Starts `options.processes` copies of `command` and supervises them until they exit."""

    def __init__(
        self,
        command: Sequence[str],
        options: SupervisorOptions,
        *,
        env: Mapping[str, str] | None = None,
        signals: SupervisorSignals | None = None,
        on_orphans: OrphanHandler | None = None,
    ) -> None:
        self.command = list(command)
        self.options = options.validated()
        self.signals = signals or SupervisorSignals()
        self._env = {**(os.environ if env is None else env), SUPERVISOR_PID_ENV: str(os.getpid())}
        self._on_orphans = on_orphans
        self._slots = [_Slot(number) for number in range(options.processes)]
        self._events: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        self._stop_signal: int | None = None
        self._forced_exit: int | None = None

    @property
    def pids(self) -> list[int]:
        """The pids of the children alive now."""
        return [slot.process.pid for slot in self._slots if slot.process is not None]

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop as if `signum` had been received. Safe from any thread and signal handlers."""
        self._events.put(_SignalReceived(signum))

    def run(self, *, install_signal_handlers: bool = True) -> int:
        previous = self._install_signal_handlers() if install_signal_handlers else {}
        try:
            for slot in self._slots:
                self._spawn(slot)
            while self._active():
                event = self._next_event()
                if isinstance(event, _ChildExited):
                    self._on_exit(event)
                elif isinstance(event, _SignalReceived):
                    self._on_signal(event.signum)
                self._restart_due()
        except BaseException:
            self._stop(signal.SIGTERM)
            raise
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self._exit_code()

    # -- children -------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        ledger = _LedgerPipe() if self._on_orphans is not None else None
        env = {**self._env, WORKER_SLOT_ENV: str(slot.number)}
        if ledger is not None:
            env[LEDGER_FD_ENV] = str(ledger.write_fd)
        try:
            process = subprocess.Popen(
                self.command,
                env=env,
                stdin=subprocess.DEVNULL,
                process_group=0,
                pass_fds=() if ledger is None else (ledger.write_fd,),
            )
        finally:
            if ledger is not None:
                ledger.close_write_end()
        slot.process, slot.restart_at = process, None
        waiter = threading.Thread(
            target=self._wait_for,
            args=(slot, process, ledger),
            name=f"chronoq-supervise-{slot.number}",
            daemon=True,
        )
        waiter.start()
        log.info(
            "started worker process %d (pid %d)",
            slot.number,
            process.pid,
            extra={"action": "supervisor.start", "slot": slot.number, "pid": process.pid},
        )
        self.signals.started(slot.number, process.pid)

    def _wait_for(
        self, slot: _Slot, process: subprocess.Popen[bytes], ledger: _LedgerPipe | None
    ) -> None:
        code = process.wait()
        orphans = ledger.finish(process.pid, code) if ledger is not None else None
        self._events.put(_ChildExited(slot, process, code, orphans))

    def _active(self) -> bool:
        return any(s.process is not None or s.restart_at is not None for s in self._slots)

    def _next_event(self) -> _Event | None:
        due = [slot.restart_at for slot in self._slots if slot.restart_at is not None]
        timeout = max(0.0, min(due) - time.monotonic()) if due else None
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _on_exit(self, event: _ChildExited) -> None:
        slot, code = event.slot, event.code
        if slot.process is not event.process:
            return
        slot.process, slot.last_code = None, code
        self.signals.exited(slot.number, event.process.pid, code)
        self._log_exit(slot, event.process.pid, code)
        orphans = event.orphans
        running = orphans.running if orphans is not None else frozenset()
        if code != 0 and orphans is not None and orphans.worker_id is not None:
            self._settle_orphans(slot, orphans)
        # Two deaths are not the process's fault and do not use the crash budget: retiring
        # because a job's thread is stuck (the timeout failed that job), and a job killing it
        # (that job's attempt pays for the crash).
        slot.excused = code == EXIT_RETIRED or bool(running)
        if code != 0 and self._stop_signal is None:
            self._after_death(slot, code, bool(running))

    def _after_death(self, slot: _Slot, code: int, ran_jobs: bool) -> None:
        """A child died while the fleet runs: replace it, or stop the fleet."""
        if code == EXIT_RETIRED and not ran_jobs:
            self._restart(slot, 0.0, "it retired")
        elif slot.excused:
            self._restart(slot, EXCUSED_RESTART_DELAY, "the jobs it ran pay for the crash")
        elif code == EXIT_CONFIG:
            log.error(
                "worker process %d has a configuration error; stopping",
                slot.number,
                extra={"action": "supervisor.config_error", "slot": slot.number},
            )
            self._fail(EXIT_CONFIG)
        elif self._crash_looping(slot):
            log.error(
                "worker process %d crashed %d times within %.0fs; giving up",
                slot.number,
                len(slot.crashes),
                self.options.restart_window,
                extra={"action": "supervisor.give_up", "slot": slot.number},
            )
            self._fail(1)
        else:
            self._restart(slot, self._backoff(slot), "it crashed")

    def _restart(self, slot: _Slot, delay: float, why: str) -> None:
        slot.restart_at = time.monotonic() + delay
        log.info(
            "restarting worker process %d in %.1fs: %s",
            slot.number,
            delay,
            why,
            extra={"action": "supervisor.restart", "slot": slot.number},
        )

    def _settle_orphans(self, slot: _Slot, orphans: Orphans) -> None:
        running = sorted(job_id for job_id, _ in orphans.running)
        log.warning(
            "worker process %d (pid %d) died running job(s) %s; settling what it held",
            slot.number,
            orphans.pid,
            running or "none",
            extra={"action": "supervisor.orphans", "slot": slot.number, "job_ids": running},
        )
        handler = self._on_orphans
        if handler is None:
            return

        def settle() -> None:
            try:
                handler(orphans)
            except Exception:
                log.exception(
                    "could not settle the jobs of worker process %d; their leases "
                    "will expire instead",
                    slot.number,
                    extra={
                        "action": "supervisor.settle_error",
                        "slot": slot.number,
                        "job_ids": running,
                    },
                )
            self.signals.orphans_settled(slot.number, orphans)

        threading.Thread(target=settle, name=f"chronoq-orphans-{orphans.pid}", daemon=True).start()

    def _log_exit(self, slot: _Slot, pid: int, code: int) -> None:
        how = describe_exit(code)
        level = logging.INFO if code == 0 else logging.WARNING
        extra = {"action": "supervisor.exit", "slot": slot.number, "pid": pid, "code": code}
        log.log(level, "worker process %d (pid %d) %s", slot.number, pid, how, extra=extra)

    def _crash_looping(self, slot: _Slot) -> bool:
        now = time.monotonic()
        slot.crashes.append(now)
        while slot.crashes and slot.crashes[0] < now - self.options.restart_window:
            slot.crashes.popleft()
        return len(slot.crashes) > self.options.max_restarts

    def _backoff(self, slot: _Slot) -> float:
        exponent = max(len(slot.crashes) - 1, 0)
        return float(min(self.options.backoff_cap, self.options.backoff_base * 2**exponent))

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.restart_at is not None and slot.restart_at <= now:
                self._spawn(slot)

    # -- stopping -------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        again = self._stop_signal is not None
        log.info(
            "received %s: %s",
            signal_name(signum),
            "forwarding it, workers stop at once" if again else "stopping the worker processes",
            extra={"action": "supervisor.signal"},
        )
        self._stop(signum)

    def _fail(self, code: int) -> None:
        if self._forced_exit is None:
            self._forced_exit = code
        self._stop(signal.SIGTERM)

    def _stop(self, signum: int) -> None:
        if self._stop_signal is None:
            self._stop_signal = signum
        for slot in self._slots:
            slot.restart_at = None
            if slot.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    slot.process.send_signal(signum)

    def _exit_code(self) -> int:
        if self._forced_exit is not None:
            return self._forced_exit
        stopped = self._stop_signal is not None
        clean = all(
            slot.last_code == 0
            or slot.excused
            or (stopped and slot.last_code in _STOPPED_BY_SIGNAL)
            for slot in self._slots
        )
        return 0 if clean else 1

    def _install_signal_handlers(self) -> dict[int, _SignalHandler]:
        previous: dict[int, _SignalHandler] = {}
        for signum in FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, self._handle_signal)
        return previous

    def _handle_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request_stop(signum)


class _LedgerPipe:
    """The pipe a child writes its holdings to, read to the end by a thread of its own."""

    def __init__(self) -> None:
        self._read_fd, self.write_fd = os.pipe()
        self._reader = LedgerReader()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="chronoq-ledger", daemon=True)
        self._thread.start()

    def close_write_end(self) -> None:
        os.close(self.write_fd)

    def _read(self) -> None:
        try:
            while data := os.read(self._read_fd, 65536):
                with self._lock:
                    self._reader.feed(data)
        finally:
            os.close(self._read_fd)

    def finish(self, pid: int, code: int) -> Orphans:
        """After the child's death: what it held when it died."""
        self._thread.join(LEDGER_DRAIN_SECONDS)
        with self._lock:
            running = frozenset(self._reader.running.items())
            return Orphans(pid, code, self._reader.worker_id, running)
