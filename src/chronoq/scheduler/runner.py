"""`chronoq scheduler`: elect a leader, and run the leader-only services on it.

```
 every process:  sync declared schedules and limits ─► loop:
                   attempt() ── refused ─► stand by, ask again in `election_interval`
                      │ granted (term N)
                      ▼
                   run each service whose time has come, while the term is trusted
                   (cron enqueuer · lease rescuer · pruner), then wait for the next
```

Any number of schedulers may run; one leads. The others stand by and take over within one
election interval after the leader's session ends (PostgreSQL), or when its lock row expires
(SQLite). A leader trusts its term for half the elector's ttl after the last confirmation and
asks again before running anything past that, so a leader cut off from the database stops
acting before a successor can be elected on SQLite, and at its next statement on PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from chronoq.errors import ChronoqError, ConfigError
from chronoq.scheduler.services import CronEnqueuer, CronOptions, LeaseRescuer, Pruner, Service
from chronoq.storage.base import LeaderElector, LeaderTerm

if TYPE_CHECKING:
    from chronoq.app import App
    from chronoq.observability.metrics import Metrics

log = logging.getLogger("chronoq.scheduler")
DUTY = "scheduler"


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    election_interval: float = 1.0
    # How long a SQLite lock row outlives its holder's last renewal (PostgreSQL's advisory lock
    # lives as long as the leader's session and does not need it).
    leader_ttl: float = 10.0
    lookahead: timedelta = timedelta(seconds=5)
    rescue_interval: float = 5.0
    prune_interval: float = 60.0
    retention: timedelta = timedelta(days=7)

    def validated(self) -> SchedulerOptions:
        if not 0 < self.election_interval < self.leader_ttl / 2:
            raise ConfigError("election_interval must be positive and under half of leader_ttl")
        for name in ("rescue_interval", "prune_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive seconds")
        if self.lookahead < timedelta(0) or self.retention < timedelta(0):
            raise ConfigError("lookahead and retention must not be negative")
        return self


class SchedulerSignals:
    """Hooks tests wait on; no-ops in production."""

    def elected(self, term: LeaderTerm) -> None:
        pass

    def deposed(self) -> None:
        pass

    def ran(self, service: str) -> None:
        pass


@dataclass(slots=True)
class _Due:
    service: Service
    at: float = 0.0  # monotonic


@dataclass(slots=True)
class SchedulerState:
    term: LeaderTerm | None = None
    trusted_until: float = 0.0
    passes: dict[str, int] = field(default_factory=dict)


def default_holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Scheduler:
    """Runs the leader-only services of `app` while elected. `metrics` (else the app's, if
    any) counts leader changes, schedule ticks and rescued leases."""

    def __init__(
        self,
        app: App,
        options: SchedulerOptions | None = None,
        *,
        elector: LeaderElector | None = None,
        signals: SchedulerSignals | None = None,
        holder: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.app = app
        self.options = (options or SchedulerOptions()).validated()
        self.holder = holder or default_holder_id()
        self.signals = signals or SchedulerSignals()
        self.metrics = metrics if metrics is not None else app.metrics
        self._elector = elector
        self._stop = threading.Event()
        self.state = SchedulerState()
        cron_options = CronOptions(lookahead=self.options.lookahead)
        self.cron = CronEnqueuer(app, cron_options, metrics=self.metrics)
        self._services = [
            _Due(self.cron),
            _Due(LeaseRescuer(app, self.options.rescue_interval, metrics=self.metrics)),
            _Due(Pruner(app, self.options.retention, self.options.prune_interval)),
        ]

    @property
    def is_leader(self) -> bool:
        return self.state.term is not None

    def request_stop(self) -> None:
        self._stop.set()

    def run(self, *, install_signal_handlers: bool = True) -> None:
        if install_signal_handlers:
            self._install_signal_handlers()
        self.app.sync()
        elector = self._elector or self.app.store.leader_elector(
            DUTY, self.holder, self.options.leader_ttl
        )
        log.info(
            "scheduler %s started on %s",
            self.holder,
            self.app.store.dsn_display,
            extra={"action": "scheduler.start", "holder": self.holder},
        )
        try:
            while not self._stop.is_set():
                self._stop.wait(self._step(elector))
        finally:
            elector.close()
            if self.state.term is not None:
                self._step_down("stopped", level=logging.INFO)

    def _step(self, elector: LeaderElector) -> float:
        self._elect(elector)
        if self.state.term is None:
            return self.options.election_interval
        now = time.monotonic()
        for due in self._services:
            if self._stop.is_set() or time.monotonic() > self.state.trusted_until:
                break
            if due.at <= now:
                due.at = time.monotonic() + self._run(due.service)
        soonest = min(due.at for due in self._services) - time.monotonic()
        return max(0.0, min(self.options.election_interval, soonest))

    def _elect(self, elector: LeaderElector) -> None:
        term = elector.attempt()
        if term is None:
            if self.state.term is not None:
                self._step_down("lost the election")
            return
        newly = self.state.term is None or self.state.term.term != term.term
        self.state.term = term
        if newly:
            log.info(
                "scheduler %s leads (term %d)",
                self.holder,
                term.term,
                extra={"action": "scheduler.elected", "holder": self.holder, "term": term.term},
            )
            if self.metrics is not None:
                self.metrics.leader_changed(DUTY, leading=True)
            self.signals.elected(term)
        self.state.trusted_until = time.monotonic() + self.options.leader_ttl / 2

    def _step_down(self, why: str, level: int = logging.WARNING) -> None:
        log.log(
            level,
            "scheduler %s no longer leads: %s",
            self.holder,
            why,
            extra={"action": "scheduler.deposed", "holder": self.holder},
        )
        self.state.term = None
        for due in self._services:
            due.at = 0.0
        if self.metrics is not None:
            self.metrics.leader_changed(DUTY, leading=False)
        self.signals.deposed()

    def _run(self, service: Service) -> float:
        try:
            wait = service.run_once()
        except ChronoqError as exc:
            # A database restart is an ordinary event: log it and try again after a while.
            log.error(
                "%s pass failed: %s",
                service.name,
                exc,
                extra={"action": f"scheduler.{service.name}", "holder": self.holder},
            )
            wait = min(service.interval, 1.0)
        self.state.passes[service.name] = self.state.passes.get(service.name, 0) + 1
        self.signals.ran(service.name)
        return wait

    def _install_signal_handlers(self) -> None:
        def stop(signum: int, frame: object) -> None:
            self.request_stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop)
