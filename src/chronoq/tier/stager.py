"""The partition leader's stager: near-due jobs from PostgreSQL into Redis and the wheel.

```
 PostgreSQL ── job_stage_candidates ──► rows not known yet (or changed, or moved long ago)
   full pass: the whole horizon,             │
              every stage_interval           ▼
   near pass: the jobs due before the  TimerStore.stage(p, epoch, timers) ──► Led.remember
              next full pass, when a
              NOTIFY says one is
```

Two kinds of pass read the same statement. A full pass reads the whole horizon every
stage_interval, from the lowest id up (retries, rescues, requeues, resumed queues, and jobs
that time brought into the horizon). A near pass reads only the ids above a cursor: the new
jobs. An insert's notification names the earliest `run_at` of its rows, and asks for a near
pass only when the next full pass would stage that job too late (within `NEAR_MARGIN` of its
run_at); a job due later is left to that pass, and near passes are at least `NEAR_GAP` apart,
so a burst of enqueues costs one read per gap, not one per notification. Other notifications
(a job made pending again: a retry, a rescue, a requeue) have old ids, which only a full pass
reads, so they ask for nothing.

The near pass's cursor lags one pass behind: it is the highest id seen by the pass before the
last one, so a job whose transaction took an id, then committed after a later id was already
read, is still found by the next near pass. Only a transaction open across two passes leaves
its jobs to the full pass, within stage_interval.

It runs on a thread of its own, so reading the horizon never holds up a move; a second thread
turns the store's change notifications into near passes. After a full pass, jobs no longer
pending in the horizon are forgotten.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from chronoq.core.backoff import Backoff
from chronoq.errors import ChronoqError
from chronoq.observability.events import TimersStaged
from chronoq.storage.base import JobStageParams, StageRow
from chronoq.tier.dbclock import due_ms
from chronoq.tier.partitions import Led, Partition
from chronoq.tier.ports import PartitionLost, StaleEpoch, Timer

# _staging_verdict: stage the row (any other answer is an entry id to look for, or None)
STAGE = "stage"

if TYPE_CHECKING:
    from chronoq.runtime import Runtime
    from chronoq.tier.options import TierOptions

log = logging.getLogger("chronoq.tier")
FAILURE_PAUSE_MAX = 30.0
# A new job is staged at least this long before it is due (its notification says when).
NEAR_MARGIN = 0.1
# Near passes come at least this far apart: what it adds to a due-now job's start, at most.
NEAR_GAP = 0.01


class Stager:
    """Stages the jobs of the partitions `led` holds; `moved` wakes the mover after a stage."""

    def __init__(
        self,
        runtime: Runtime,
        led: Led,
        options: TierOptions,
        moved: threading.Event,
        monotonic: Callable[[], float],
    ) -> None:
        self.runtime = runtime
        self.led = led
        self.options = options
        self._wake = moved  # the mover: something may be due sooner
        self._monotonic = monotonic
        self.now = threading.Event()  # new jobs, or a partition to stage
        self._plan = threading.Lock()
        self.next_full = 0.0
        self.next_near = math.inf
        self._last_near = -math.inf
        # The highest id seen by the pass before the last one, and by the last one.
        self._waters = (0, 0)
        self.failure: BaseException | None = None
        self._failures = 0
        self._unstageable: set[int] = set()  # job ids already reported as unstageable

    def restage(self) -> None:
        """Stage every partition's whole horizon at once (one taken over, or lost by Redis)."""
        self.next_full = 0.0
        self.now.set()

    def notified(self, payload: str) -> None:
        """Jobs were inserted: plan a near pass, unless the next full pass is soon enough for
        the earliest of them (see the module docstring)."""
        run_at = notified_run_at(payload)
        if run_at is None:
            return  # old ids made pending again: only a full pass reads them
        due = self._due_at(run_at)
        with self._plan:
            if due is not None and due - NEAR_MARGIN >= self.next_full + NEAR_MARGIN:
                return
            # As late as is safe: the pass then reads every job inserted meanwhile too.
            at = self._last_near + NEAR_GAP
            if due is not None:
                at = max(at, due - NEAR_MARGIN)
            if at < self.next_near:
                self.next_near = at
                self.now.set()

    def _due_at(self, run_at: float) -> float | None:
        """When, on the local monotonic clock, a job due at `run_at` (seconds since the epoch
        on the database clock) is due; None before the database clock was first read."""
        if not self.led.clock.known:
            return None
        return self.led.clock.deadline(math.ceil(run_at * 1000))

    # -- the loops ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Thread: a full pass over the horizon every stage_interval, a near pass when a
        notification asks for one. A pass that fails is logged and tried again after a
        pause that grows while it keeps failing: staging must outlive any one row or reply
        it cannot handle."""
        try:
            while not stop.is_set():
                self.now.wait(max(0.0, min(self.next_full, self.next_near) - self._monotonic()))
                self.now.clear()
                if stop.is_set():
                    return
                self._stage_guarded(stop)
        except BaseException as exc:
            log.exception("the tier stager failed", extra={"action": "tier.failed"})
            self.failure = exc
            stop.set()
            self._wake.set()

    def _stage_guarded(self, stop: threading.Event) -> None:
        try:
            self.stage_once()
        except Exception:
            self._failures += 1
            pause = Backoff(self.options.stage_interval, FAILURE_PAUSE_MAX).window(self._failures)
            log.exception(
                "a staging pass failed (%d in a row): trying again in %.1f s",
                self._failures,
                pause,
                extra={"action": "tier.stage_failed"},
            )
            self.next_full = self._monotonic() + pause
            stop.wait(pause)
        else:
            self._failures = 0

    def stage_once(self) -> None:
        now = self._monotonic()
        with self._plan:
            full = now >= self.next_full
            near = not full and now >= self.next_near
            if full:
                self.next_full = now + self.options.stage_interval
            if full or near:
                self.next_near = math.inf  # a full pass reads what a near one would
            if near:
                self._last_near = now
        if full or near:
            self._stage(full=full)

    def listen(self, stop: threading.Event) -> None:
        """Thread: a job became pending somewhere; stage the new ones now, not at the pass."""
        while not stop.is_set():
            try:
                listener = self.runtime.store.open_listener()
            except ChronoqError as exc:
                log.warning("tier leader cannot listen for new jobs: %s", exc)
                stop.wait(self.options.stage_interval)
                continue
            try:
                while not stop.is_set():
                    for payload in listener.notices(0.5):
                        self.notified(payload)
            except ChronoqError as exc:
                log.warning("tier leader lost its change listener: %s", exc)
            finally:
                listener.close()

    # -- staging --------------------------------------------------------------------------

    def _stage(self, *, full: bool) -> None:
        with self.led.lock:
            acting = {p.number: p for p in self.led.acting()}
        if not acting:
            return
        seen: set[int] = set()
        cursor = 0 if full else self._waters[0]
        while True:
            rows = self._candidates(sorted(acting), cursor)
            if rows is None:
                return
            self._stage_rows(acting, rows, seen)
            if len(rows) < self.options.stage_batch:
                break
            cursor = rows[-1].id
        last = self._waters[1]
        self._waters = (last, max(last, max(seen, default=last)))
        if full:
            with self.led.lock:
                self._prune([p for p in acting.values() if self.led.still_leads(p)], seen)

    def _candidates(self, partitions: Sequence[int], after_id: int) -> list[StageRow] | None:
        params = JobStageParams(
            partitions=partitions,
            partition_count=self.options.partitions,
            horizon=timedelta(seconds=self.options.horizon),
            after_id=after_id,
            limit=self.options.stage_batch,
        )
        sent = self._monotonic()
        try:
            staging = self.runtime.store.job_stage_candidates(params)
        except ChronoqError as exc:
            log.warning("cannot read jobs to stage: %s", exc, extra={"action": "tier.stage"})
            return None
        received = self._monotonic()
        if staging.read_at is not None and self._monotonic is time.monotonic:
            # The store timed the statement alone: a wait for a pooled connection, or a busy
            # pool, would otherwise skew the estimate by up to that wait.
            sent = received = staging.read_at
        self.led.clock.observe(staging.db_now, sent, received)
        return staging.rows

    def _stage_rows(
        self, acting: dict[int, Partition], rows: Sequence[StageRow], seen: set[int]
    ) -> None:
        now = self._monotonic()
        batches: dict[int, list[Timer]] = {}
        moved: dict[int, list[tuple[Timer, str]]] = {}
        with self.led.lock:
            for row in rows:
                seen.add(row.id)
                number = row.id % self.options.partitions
                if number not in acting:
                    continue
                timer = self._timer(row)
                if timer is None:
                    continue
                verdict = self._staging_verdict(timer, now)
                if verdict == STAGE:
                    batches.setdefault(number, []).append(timer)
                elif verdict is not None:
                    moved.setdefault(number, []).append((timer, verdict))
        for number, entries in moved.items():
            batches.setdefault(number, []).extend(self._entries_gone(acting[number], entries))
        for number, timers in batches.items():
            self._stage_timers(acting[number], timers)

    def _timer(self, row: StageRow) -> Timer | None:
        """The row as a timer; None for a row no timer store can hold (reported once): one
        bad row must not stop the staging of every other."""
        try:
            return Timer(row.id, row.lease_token, row.queue, due_ms(row.run_at))
        except ValueError as exc:
            if row.id not in self._unstageable and len(self._unstageable) < 10_000:
                self._unstageable.add(row.id)
                log.error(
                    "job %d cannot be staged, db workers can still run it: %s",
                    row.id,
                    exc,
                    extra={"action": "tier.unstageable", "job": row.id},
                )
            return None

    def _staging_verdict(self, timer: Timer, now: float) -> str | None:
        """STAGE: new, or changed since it was staged; an entry id: moved restage_after ago
        and still pending, stage it again only if that entry no longer waits; None: as
        staged."""
        known = self.led.known.get(timer.job_id)
        if known is None or known.token != timer.token:
            return STAGE
        if known.moved_at is None:
            return STAGE if known.due_ms != timer.due_ms else None
        if now - known.moved_at < self.options.restage_after:
            return None
        if known.entry is None:
            return STAGE  # moved before its entry was known (a lost reply): stage again
        return known.entry

    def _entries_gone(self, part: Partition, timers: list[tuple[Timer, str]]) -> list[Timer]:
        """Of jobs moved long ago and still pending, those whose stream entry is gone (lost,
        or acknowledged while the job stayed pending): stage them again. The others wait in
        a backlog or on a queue no worker reads: staging them again would only grow the
        streams; ask again restage_after later."""
        try:
            waiting = self.led.timers.waiting(part.number, [(t.queue, e) for t, e in timers])
        except ChronoqError as exc:
            log.warning("cannot ask which entries of partition %d wait: %s", part.number, exc)
            return []
        now = self._monotonic()
        gone: list[Timer] = []
        with self.led.lock:
            for timer, entry in timers:
                known = self.led.known.get(timer.job_id)
                if (timer.queue, entry) not in waiting:
                    gone.append(timer)
                elif known is not None:
                    known.moved_at = now
        return gone

    def _stage_timers(self, part: Partition, timers: list[Timer]) -> None:
        """Into Redis first, then into the wheel: a timer the wheel holds is in Redis."""
        led = self.led
        with led.lock:
            # The rows were read outside the lock: the partition may have been given up, or
            # its trust window may have ended, meanwhile. Its next leader stages them.
            if not led.still_leads(part) or self._monotonic() >= part.trusted_until:
                return
        try:
            staged = led.timers.stage(part.number, part.epoch, timers)
        except StaleEpoch:
            with led.lock:
                if led.still_leads(part):
                    led.refused(part, "stale")
            return
        except PartitionLost:
            with led.lock:
                if led.still_leads(part):
                    led.lost(part)
            return
        except ChronoqError as exc:
            log.warning("cannot stage partition %d: %s", part.number, exc)
            return
        on_streams = {entry.job_id: entry for entry in staged.moved}
        with led.lock:
            if not led.still_leads(part):
                return  # stepped down meanwhile: the next leader stages them again
            now = self._monotonic()
            for timer in timers:
                entry = on_streams.get(timer.job_id)
                if entry is not None and entry.token == timer.token:
                    led.adopt(part, timer, entry, now)  # moved before: asked about later
                else:
                    led.remember(part, timer)
            if part.lost_at is not None:
                part.staged_since_lost += len(timers)
        led.events.emit(TimersStaged(part.number, len(timers)))
        self._wake.set()

    def _prune(self, parts: Iterable[Partition], seen: set[int]) -> None:
        """After a full pass: jobs no longer pending in the horizon (run, cancelled) are
        forgotten; a staged timer of such a job still moves, and the claim drops it."""
        for part in parts:
            gone = [job_id for job_id in part.jobs if job_id not in seen]
            for job_id in gone:
                known = self.led.drop(part, job_id)
                if known is not None and known.moved_at is None:
                    # Still in Redis: keep a timer so the partition moves when it falls due.
                    self.led.expect_in_redis(part, known.due_ms)
            if part.lost_at is not None:
                self.led.reconciled(part)


def notified_run_at(payload: str) -> float | None:
    """The earliest `run_at` (seconds since the epoch) an insert's notification names; None
    for one that names none (an update making a job pending names only its queue)."""
    try:
        value = json.loads(payload).get("run_at") if payload else None
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None
