"""`build_job`: a Job built without the frozen dataclass's per-field calls is a Job in every way."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from chronoq.core.jobs import Job, JobStatus, build_job

NOW = datetime(2026, 12, 2, 9, 12, tzinfo=UTC)
FIELDS = {
    "id": 7,
    "queue": "default",
    "task": "send_email",
    "payload": {"to": "a@example.com"},
    "status": JobStatus.RUNNING,
    "priority": 0,
    "run_at": NOW,
    "attempts": 1,
    "max_attempts": 3,
    "lease_seconds": 60.0,
    "lease_token": 4,
    "locked_until": NOW,
    "worker_id": "w1",
    "key": None,
    "errors": [],
    "created_at": NOW,
    "started_at": NOW,
    "finished_at": None,
}


def test_a_built_job_equals_the_one_its_constructor_makes() -> None:
    by_name = build_job(**FIELDS)
    in_order = build_job(*FIELDS.values(), "skip", 5.0)
    assert type(by_name) is Job
    assert by_name == Job(**FIELDS)
    assert repr(by_name) == repr(Job(**FIELDS))
    assert by_name.misfire == "run_late" and by_name.trace_context is None  # defaults kept
    assert in_order == Job(*FIELDS.values(), "skip", 5.0)
    assert (in_order.misfire, in_order.misfire_grace) == ("skip", 5.0)
    assert dataclasses.replace(by_name, attempts=2).attempts == 2


def test_a_built_job_is_frozen_and_has_no_room_for_other_attributes() -> None:
    job = build_job(**FIELDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.attempts = 2  # type: ignore[misc]
    # Refused as a constructed Job refuses it (on Python 3.11 a TypeError, from the frozen
    # __setattr__ of a slotted dataclass; an AttributeError on later versions).
    for each in (job, Job(**FIELDS)):
        with pytest.raises((TypeError, AttributeError)):
            each.extra = 1  # type: ignore[attr-defined]
    assert job.out_of_attempts is False


def test_build_job_refuses_what_the_constructor_refuses() -> None:
    with pytest.raises(TypeError, match="missing"):
        build_job(id=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        build_job(**FIELDS, colour="red")
