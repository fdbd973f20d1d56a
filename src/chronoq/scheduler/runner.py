"""`chronoq scheduler`: elect a leader, and run the leader-only services on it.

```
 every process:  sync declared schedules and limits ─► loop:
                   step() ── partition 0 not led ─► stand by, ask again in `election_interval`
                      │ led (epoch N, trusted until T)
                      ▼
                   run each service whose time has come, while T has not passed
                   (cron enqueuer · lease rescuer · pruner), then wait for the next
```

The scheduler's duty is an election of one partition (chronoq.coordination). Any number of
schedulers may run; one leads. The others stand by and take over within one election interval
after the leader's session ends (PostgreSQL), or when its lock row expires (SQLite). A leader
trusts its term until the elector's trust window ends (half its ttl after the last
confirmation) and asks again before running anything past that, so a leader cut off from the
database stops acting before a successor can be elected on SQLite, and at its next statement on
PostgreSQL.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from chronoq.coordination.base import Leadership, LeaderTerm, PartitionElector
from chronoq.coordination.legacy import LeaderElector, as_partition_elector
from chronoq.errors import ChronoqError, ConfigError
from chronoq.fleet.beacon import BEAT_INTERVAL, Beacon, this_process
from chronoq.fleet.records import ProcessInfo
from chronoq.observability.eventlog import EventLog
from chronoq.observability.events import LeaderChanged, Observer, Observers, ServiceRan
from chronoq.scheduler.services import CronEnqueuer, CronOptions, LeaseRescuer, Pruner, Service

if TYPE_CHECKING:
    from chronoq.app import App
    from chronoq.tier.leader import TierLeader

log = logging.getLogger("chronoq.scheduler")
DUTY = "scheduler"
_END_OF_TIME = datetime.max.replace(tzinfo=UTC)  # the end of a trust window that never ends


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
    # How often the scheduler refreshes its record in the fleet registry (chronoq.fleet).
    beat_interval: float = BEAT_INTERVAL

    def validated(self) -> SchedulerOptions:
        if not 0 < self.election_interval < self.leader_ttl / 2:
            raise ConfigError("election_interval must be positive and under half of leader_ttl")
        for name in ("rescue_interval", "prune_interval", "beat_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive seconds")
        if self.lookahead < timedelta(0) or self.retention < timedelta(0):
            raise ConfigError("lookahead and retention must not be negative")
        return self


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
    """Runs the leader-only services of `app` while elected. `observers` get its events
    (leader changes, ticks fired, leases rescued, passes run; the test kit's
    `chronoq.testing.SchedulerSignals` is one), and so do the app's `observers` (its
    `metrics`, say)."""

    def __init__(
        self,
        app: App,
        options: SchedulerOptions | None = None,
        *,
        elector: PartitionElector | LeaderElector | None = None,
        observers: Iterable[Observer] = (),
        holder: str | None = None,
        tier: TierLeader | None = None,
    ) -> None:
        self.runtime = runtime = app.runtime()
        self._tier = tier
        self._tier_failure: BaseException | None = None
        self.options = (options or SchedulerOptions()).validated()
        self.holder = holder or default_holder_id()
        self.events = Observers([EventLog(), *observers], runtime.observers)
        # An elector of the old attempt()/resign() shape is wrapped, with a DeprecationWarning.
        self._elector = (
            None if elector is None else as_partition_elector(elector, self.options.leader_ttl)
        )
        self._stop = threading.Event()
        self.state = SchedulerState()
        cron_options = CronOptions(lookahead=self.options.lookahead)
        self.cron = CronEnqueuer(runtime, cron_options, self.events)
        opts = self.options
        self._services = [
            _Due(self.cron),
            _Due(LeaseRescuer(runtime, opts.rescue_interval, self.events)),
            _Due(Pruner(runtime, opts.retention, opts.prune_interval, self.events)),
        ]
        self._info = this_process(self.holder, "scheduler", runtime.tasks.values())
        self.beacon = Beacon(runtime.store, self._describe, interval=opts.beat_interval)

    @property
    def is_leader(self) -> bool:
        return self.state.term is not None

    @property
    def tier(self) -> TierLeader | None:
        return self._tier

    @property
    def duties(self) -> tuple[str, ...]:
        """The leader duties this scheduler holds now: "scheduler", "partition:N"."""
        held = (DUTY,) if self.is_leader else ()
        tier = self._tier
        partitions = sorted(tier.partitions) if tier is not None else []
        return held + tuple(f"partition:{number}" for number in partitions)

    def _describe(self) -> ProcessInfo:
        """The fleet registry's record of this scheduler, as of now (the beacon's thread)."""
        return replace(self._info, duties=self.duties)

    def request_stop(self) -> None:
        self._stop.set()
        if self._tier is not None:
            self._tier.wake()

    def run(self, *, install_signal_handlers: bool = True) -> None:
        if install_signal_handlers:
            self._install_signal_handlers()
        self.runtime.sync()
        elector = self._elector or self.runtime.store.elector(
            DUTY, self.holder, self.options.leader_ttl
        )
        tier: threading.Thread | None = None
        self.beacon.start()
        try:
            tier = self._start_tier()
            log.info(
                "scheduler %s started on %s (dispatch %s)",
                self.holder,
                self.runtime.store.dsn_display,
                self.runtime.config.dispatch,
                extra={"action": "scheduler.start", "holder": self.holder},
            )
            while not self._stop.is_set():
                self._stop.wait(self._step(elector))
        finally:
            if tier is not None:
                tier.join()
            elector.close()
            if self.state.term is not None:
                self._step_down("stopped", graceful=True)
            self.beacon.stop()
        if self._tier_failure is not None:
            raise self._tier_failure

    def _start_tier(self) -> threading.Thread | None:
        """Tiered dispatch: lead partitions too, beside the leader-only services."""
        if self._tier is None and self.runtime.config.dispatch == "tiered":
            from chronoq.tier.wiring import open_leader

            self._tier = open_leader(self.runtime, self.holder, self.events)
        if self._tier is None:
            return None
        tier = self._tier
        thread = threading.Thread(
            target=self._run_tier, args=(tier,), name="chronoq-tier", daemon=True
        )
        thread.start()
        return thread

    def _run_tier(self, tier: TierLeader) -> None:
        """Thread: a tier that dies stops the whole scheduler, which then raises its error,
        so a supervisor sees a failed process, not one that quietly stopped dispatching."""
        try:
            tier.run(self._stop)
        except BaseException as exc:
            log.exception("the tier leader failed", extra={"action": "tier.failed"})
            self._tier_failure = exc
            self._stop.set()
        finally:
            tier.elector.close()
            tier.timers.close()

    def _step(self, elector: PartitionElector) -> float:
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

    def _elect(self, elector: PartitionElector) -> None:
        lead = elector.step().get(0)
        if lead is None:
            if self.state.term is not None:
                self._step_down("lost the election")
            return
        newly = self.state.term is None or self.state.term.term != lead.epoch
        held = None if newly else self.state.term
        self.state.term = self._term(elector.holder, lead, held)
        if newly:
            self.events.emit(LeaderChanged(DUTY, self.holder, self.state.term))
        self.state.trusted_until = lead.trusted_until

    def _term(self, holder: str, lead: Leadership, held: LeaderTerm | None) -> LeaderTerm:
        """The term as this process sees it: elected when it first led under this epoch,
        renewed now, and (in `expires_at`) trusted until the end of its trust window."""
        now = datetime.now(UTC)
        left = lead.trusted_until - time.monotonic()
        until = now + timedelta(seconds=left) if math.isfinite(left) else _END_OF_TIME
        elected = held.elected_at if held is not None else now
        return LeaderTerm(DUTY, holder, lead.epoch, elected, now, until)

    def _step_down(self, why: str, *, graceful: bool = False) -> None:
        self.state.term = None
        for due in self._services:
            due.at = 0.0
        self.events.emit(LeaderChanged(DUTY, self.holder, None, why, graceful))

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
        self.events.emit(ServiceRan(service.name))
        return wait

    def _install_signal_handlers(self) -> None:
        def stop(signum: int, frame: object) -> None:
            self.request_stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, stop)
