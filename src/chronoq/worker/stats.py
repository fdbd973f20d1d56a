"""What one worker did, counted from its events; `Worker.run` returns it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chronoq.core.jobs import Outcome
from chronoq.observability.events import (
    AttemptAbandoned,
    AttemptsEnded,
    AttemptStuck,
    JobsClaimed,
    JobsHandedOff,
    JobsReleased,
    LeasesRescued,
    Subscription,
)


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    done: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    lost: int = 0
    released: int = 0
    handed_off: int = 0  # jobs of tasks this worker does not know, given to workers that do
    rescued: int = 0
    abandoned: int = 0
    # Sync handlers still running after their timeout failed the attempt. Their threads cannot
    # be stopped: a process with any should exit (the CLI's exits with code 75).
    stuck: int = 0

    def subscriptions(self) -> Iterable[Subscription[Any]]:
        return (
            Subscription(JobsClaimed, self._claimed),
            Subscription(AttemptsEnded, self._ended),
            Subscription(JobsReleased, self._released),
            Subscription(JobsHandedOff, self._handed_off),
            Subscription(LeasesRescued, self._rescued),
            Subscription(AttemptStuck, self._stuck),
            Subscription(AttemptAbandoned, self._abandoned),
        )

    def _claimed(self, event: JobsClaimed) -> None:
        self.claimed += len(event.jobs)

    def _ended(self, event: AttemptsEnded) -> None:
        for end in event.ends:
            if not end.accepted:
                self.lost += 1
            elif end.outcome == Outcome.DONE:
                self.done += 1
            elif end.outcome == Outcome.RETRY:
                self.retried += 1
            elif end.outcome == Outcome.DEAD:
                self.dead += 1
            else:
                self.cancelled += 1

    def _released(self, event: JobsReleased) -> None:
        self.released += len(event.released)

    def _handed_off(self, event: JobsHandedOff) -> None:
        self.handed_off += len(event.handed_off)

    def _rescued(self, event: LeasesRescued) -> None:
        self.rescued += len(event.requeued) + len(event.dead)

    def _stuck(self, event: AttemptStuck) -> None:
        self.stuck += 1

    def _abandoned(self, event: AttemptAbandoned) -> None:
        self.abandoned += 1
