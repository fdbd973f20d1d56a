"""Holdings: which claimed jobs start when slots free, and which attempt a result removes."""

from __future__ import annotations

import dataclasses
from typing import cast

from chronoq.storage.base import JobStore
from chronoq.worker.attempts import Attempt, Holdings
from chronoq.worker.context import JobContext
from tests.helpers import held_job


def claimed(job_id: int) -> Attempt:
    job = held_job(job_id)
    return Attempt(job, JobContext(job, "w", cast(JobStore, None)))


def holding(*job_ids: int) -> Holdings:
    holdings = Holdings()
    for job_id in job_ids:
        holdings.hold(claimed(job_id))
    return holdings


def ids(attempts: list[Attempt]) -> list[int]:
    return [attempt.job.id for attempt in attempts]


def test_claimed_jobs_start_first_claimed_first_as_many_as_slots_are_free() -> None:
    holdings = holding(1, 2, 3, 4, 5)
    holdings.running = 1

    started = holdings.start_next(concurrency=4)

    assert ids(started) == [1, 2, 3]
    assert holdings.running == 4
    assert [attempt.job.id for attempt in holdings.buffer] == [4, 5]
    assert len(holdings) == 5  # started or not, every claimed job is still held


def test_every_buffered_job_starts_when_there_is_room_for_all() -> None:
    holdings = holding(1, 2)

    assert ids(holdings.start_next(concurrency=10)) == [1, 2]
    assert holdings.running == 2
    assert not holdings.buffer


def test_nothing_starts_while_every_slot_is_taken_or_past_the_concurrency() -> None:
    holdings = holding(1, 2)
    holdings.running = 3  # the concurrency was lowered while handlers ran

    assert holdings.start_next(concurrency=3) == []
    assert holdings.start_next(concurrency=2) == []
    assert holdings.running == 3
    assert ids(list(holdings.buffer)) == [1, 2]


def test_nothing_starts_from_an_empty_buffer() -> None:
    holdings = Holdings()

    assert holdings.start_next(concurrency=5) == []
    assert holdings.running == 0


def test_a_stale_attempts_result_leaves_the_newer_attempt_held() -> None:
    holdings = holding(1)
    newer = holdings.owned[1]
    stale = dataclasses.replace(newer.job, lease_token=0)

    assert holdings.disown(stale) is None
    assert holdings.disown(newer.job) is newer
    assert len(holdings) == 0
