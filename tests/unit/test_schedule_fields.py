"""The schedule's field lists, defined once in `chronoq.core.schedules`, fit what uses them."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from typing import get_type_hints

from chronoq.core import schedules
from chronoq.core.schedules import SCHEDULE_DEFINITION, SCHEDULE_FIELDS, SCHEDULE_TIMES, Schedule
from chronoq.storage.base import ScheduleUpsertParams


def test_a_stored_schedule_holds_its_definition() -> None:
    assert set(SCHEDULE_DEFINITION) <= set(SCHEDULE_FIELDS)


def test_the_upsert_params_carry_the_definition() -> None:
    names = tuple(field.name for field in fields(ScheduleUpsertParams))
    assert names == tuple("payload_json" if n == "payload" else n for n in SCHEDULE_DEFINITION)


def test_the_time_fields_are_the_schedules_instants() -> None:
    hints = get_type_hints(Schedule, vars(schedules))
    instants = tuple(
        name for name in SCHEDULE_FIELDS if datetime in (hints[name], *_args(hints[name]))
    )
    assert instants == SCHEDULE_TIMES


def _args(hint: object) -> tuple[object, ...]:
    return tuple(getattr(hint, "__args__", ()))
