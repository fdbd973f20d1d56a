"""The fleet registry's records: which processes run, and what tasks they know.

Every worker, scheduler and server writes a `ProcessInfo` to the store when it starts and
refreshes it while it runs (`chronoq.fleet.Beacon`); the store hands back `ProcessRecord`s,
each with its liveness decided on the database clock. This module is the pure half: what a
record holds, how a task's settings travel in one (`TaskInfo`, JSON-friendly), and what a
producer without the handlers' code learns from the records (`catalog`): each task's queue,
priority, attempts, lease, misfire rule and payload parameters, taken from the process that
reported it most recently, live processes first.

```
 worker / scheduler / server ── beat every `interval` ──► chronoq_processes (expires_at = now + ttl)
                                                              │
 chronoq processes · GET /api/v1/processes · dashboard ◄──────┤ live: not stopped, not expired
 chronoq enqueue TASK · the API without --app · SQL ◄─────────┘ catalog: live or recent (a day)
```
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from chronoq.core.misfire import Misfire, job_misfire
from chronoq.core.validate import PayloadShape

PROCESS_KINDS = ("worker", "scheduler", "server")
# How long a record outlives its process (stopped, or no longer refreshed): a producer keeps
# learning task settings from it meanwhile, and `chronoq processes --all` shows it.
RECENT = timedelta(days=1)

_KIND_NAMES = {
    inspect.Parameter.POSITIONAL_ONLY: "positional_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}
_KINDS_BY_NAME = {name: kind for kind, name in _KIND_NAMES.items()}
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _required(param: inspect.Parameter) -> bool:
    """Must a payload give this parameter? (`*args` and `**kwargs` never must.)"""
    return param.default is param.empty and param.kind not in _VARIADIC


@dataclass(frozen=True, slots=True)
class PayloadParam:
    """One parameter of a handler's payload: its name, kind and whether it must be given."""

    name: str
    kind: str
    required: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "required": self.required}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PayloadParam:
        return cls(str(data["name"]), str(data["kind"]), bool(data["required"]))


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A task as a process knows it: what its jobs get when a producer leaves it out."""

    name: str
    queue: str
    priority: int
    max_attempts: int
    lease: float
    timeout: float | None
    misfire: str
    misfire_grace: float | None
    params: tuple[PayloadParam, ...] = ()

    @classmethod
    def describe(
        cls,
        *,
        name: str,
        queue: str,
        priority: int,
        max_attempts: int,
        lease: float,
        timeout: float | None,
        misfire: Misfire,
        signature: inspect.Signature,
    ) -> TaskInfo:
        """A registered task's record (see `chronoq.Task.info`)."""
        skip = misfire.policy.value == "skip"
        return cls(
            name=name,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            lease=lease,
            timeout=timeout,
            misfire=misfire.policy.value,
            misfire_grace=misfire.grace.total_seconds() if skip else None,
            params=tuple(
                PayloadParam(p.name, _KIND_NAMES[p.kind], _required(p))
                for p in signature.parameters.values()
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "lease": self.lease,
            "timeout": self.timeout,
            "misfire": self.misfire,
            "misfire_grace": self.misfire_grace,
            "params": [param.to_json() for param in self.params],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskInfo:
        timeout, grace = data.get("timeout"), data.get("misfire_grace")
        return cls(
            name=str(data["name"]),
            queue=str(data["queue"]),
            priority=int(data.get("priority", 0)),
            max_attempts=int(data["max_attempts"]),
            lease=float(data["lease"]),
            timeout=None if timeout is None else float(timeout),
            misfire=str(data.get("misfire", "run_late")),
            misfire_grace=None if grace is None else float(grace),
            params=tuple(PayloadParam.from_json(p) for p in data.get("params", ())),
        )


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """What a process says of itself at every beat. `running` and `duties` (the leader duties
    it holds now: "scheduler", "partition:3") change while it runs; the rest does not."""

    id: str
    kind: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...] = ()
    concurrency: int | None = None
    tasks: tuple[TaskInfo, ...] = ()
    running: int = 0
    duties: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """A stored record, read back with its times on the database clock. `alive`: it has not
    stopped and has refreshed its record within its ttl."""

    info: ProcessInfo
    started_at: datetime
    seen_at: datetime
    expires_at: datetime
    stopped_at: datetime | None
    alive: bool

    @property
    def state(self) -> str:
        """ "alive", "stopped" (it said so) or "gone" (it stopped refreshing)."""
        if self.alive:
            return "alive"
        return "stopped" if self.stopped_at is not None else "gone"


@dataclass(frozen=True, slots=True)
class Fleet:
    """The records a store holds (most recently seen first), read at `db_now`."""

    processes: list[ProcessRecord]
    db_now: datetime

    @property
    def alive(self) -> list[ProcessRecord]:
        return [record for record in self.processes if record.alive]

    def of_kind(self, kind: str, *, alive: bool = True) -> list[ProcessRecord]:
        return [
            record
            for record in self.processes
            if record.info.kind == kind and (record.alive or not alive)
        ]

    def runs_task(self, task: str, queue: str, *, besides: str | None = None) -> bool:
        """Does a live worker other than `besides` know `task` and serve `queue`?"""
        return any(
            record.info.id != besides and queue in record.info.queues and _knows(record, task)
            for record in self.of_kind("worker")
        )


def _knows(record: ProcessRecord, task: str) -> bool:
    return any(known.name == task for known in record.info.tasks)


@dataclass(frozen=True, slots=True)
class RegisteredTask:
    """A task known from the registry, with the settings `chronoq.core.enqueue.prepare`
    reads from a registered task (it satisfies `TaskSettings`)."""

    info: TaskInfo
    misfire: Misfire
    payload_shape: PayloadShape
    seen_in: tuple[str, ...] = field(default=())  # ids of the processes that reported it

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def queue(self) -> str:
        return self.info.queue

    @property
    def priority(self) -> int:
        return self.info.priority

    @property
    def max_attempts(self) -> int:
        return self.info.max_attempts

    @property
    def lease(self) -> float:
        return self.info.lease

    @classmethod
    def of(cls, info: TaskInfo, seen_in: Sequence[str] = ()) -> RegisteredTask:
        grace = None if info.misfire_grace is None else timedelta(seconds=info.misfire_grace)
        return cls(
            info=info,
            misfire=job_misfire(info.misfire, grace),
            payload_shape=PayloadShape.of(info.name, _signature(info.params)),
            seen_in=tuple(seen_in),
        )


def catalog(records: Iterable[ProcessRecord]) -> dict[str, RegisteredTask]:
    """Every task the records know, each with the settings of the live process that reported
    it most recently, or failing any live one, of the most recent record. Two live processes
    that disagree (a rolling deploy that changed a queue) give the newer process's settings."""
    ordered = sorted(records, key=lambda r: (r.alive, r.seen_at), reverse=True)
    found: dict[str, TaskInfo] = {}
    seen_in: dict[str, list[str]] = {}
    for record in ordered:
        for info in record.info.tasks:
            found.setdefault(info.name, info)
            seen_in.setdefault(info.name, []).append(record.info.id)
    return {name: RegisteredTask.of(info, seen_in[name]) for name, info in sorted(found.items())}


def _signature(params: Sequence[PayloadParam]) -> inspect.Signature:
    """A signature with the recorded parameters, for the payload checks a handler's own
    signature gives: the names, which are required, whether any other name is accepted."""
    return inspect.Signature(
        [
            inspect.Parameter(
                param.name,
                kind,
                default=inspect.Parameter.empty if param.required or kind in _VARIADIC else None,
            )
            for param in _in_signature_order(params)
            for kind in [_KINDS_BY_NAME[param.kind]]
        ]
    )


def _in_signature_order(params: Sequence[PayloadParam]) -> list[PayloadParam]:
    """Parameters in an order `inspect.Signature` accepts: by kind, and within a kind the
    required ones before those with defaults where Python demands it."""
    order = list(_KINDS_BY_NAME)
    known = [p for p in params if p.kind in _KINDS_BY_NAME]
    return sorted(
        known,
        key=lambda p: (
            order.index(p.kind),
            # Only positional parameters must put those without a default first.
            not p.required if p.kind in ("positional_only", "positional_or_keyword") else False,
        ),
    )
