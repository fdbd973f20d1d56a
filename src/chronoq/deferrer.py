"""Enqueue options, kept apart from the payload: `Task.configure` returns a `Deferrer`.

```python
send_email.defer(to="a@example.com", subject="hi")                  # the payload, nothing else
send_email.configure(delay="4h", key="welcome-42").defer(to="a@example.com", subject="hi")
```

Every argument of `defer` belongs to the payload, so a handler may name its parameters anything,
`key`, `delay` and `queue` included. An option name given to `defer` that the handler does not
name as a parameter is refused with the `configure` call to write instead: before options had
`configure`, `defer` took them among the payload's keywords, and such a call must not turn into
a payload field without a word.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypedDict

from chronoq.core.enqueue import (
    RENAMED_OPTIONS,
    Enqueued,
    JobSpec,
    TaskSettings,
    check_options,
    did_you_mean,
)
from chronoq.errors import ConfigError, InvalidPayload

P = ParamSpec("P")


class _Enqueuer(Protocol):
    def enqueue_many(self, specs: Iterable[JobSpec], *, conn: Any = None) -> list[Enqueued]: ...

    async def enqueue_many_async(
        self, specs: Iterable[JobSpec], *, conn: Any = None
    ) -> list[Enqueued]: ...


class Deferrable(TaskSettings, Protocol):
    """What a `Deferrer` needs of its task (`chronoq.Task` is one): its settings, the names of
    its payload's parameters, and the app that enqueues it."""

    @property
    def app(self) -> _Enqueuer: ...
    @property
    def name(self) -> str: ...
    @property
    def payload_signature(self) -> inspect.Signature: ...


class DeferOptions(TypedDict, total=False):
    """The options `Task.configure` takes, as `App.enqueue` does; None leaves one to the task."""

    delay: timedelta | float | str | None
    run_at: datetime | None
    key: str | None
    queue: str | None
    priority: int | None
    max_attempts: int | None
    misfire: str | None
    misfire_grace: timedelta | float | str | None
    rate_key: str | None
    unique_for: timedelta | float | str | None
    conn: Any


DEFER_OPTIONS = frozenset(DeferOptions.__optional_keys__)
# What `defer` refuses when the handler does not name it: every option, and their old names.
_OPTION_WORDS = DEFER_OPTIONS | RENAMED_OPTIONS.keys()


@dataclass(frozen=True, slots=True, repr=False)
class Deferrer(Generic[P]):
    """A task with enqueue options set, made by `Task.configure`: `defer` and `defer_async`
    enqueue its jobs with them. It is immutable, so one can be kept and shared."""

    task: Deferrable
    spec: JobSpec  # the options, checked, without a payload
    conn: Any = None

    def defer(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """Enqueue a job with these options; the arguments are its payload, as for
        `Task.defer`. With `conn`, the job exists if and only if its transaction commits."""
        spec = dataclasses.replace(self.spec, payload=payload_of(self.task, args, kwargs))
        return self.task.app.enqueue_many([spec], conn=self.conn)[0]

    async def defer_async(self, *args: P.args, **kwargs: P.kwargs) -> Enqueued:
        """`defer` for async code; an async psycopg connection as `conn` joins its transaction."""
        spec = dataclasses.replace(self.spec, payload=payload_of(self.task, args, kwargs))
        return (await self.task.app.enqueue_many_async([spec], conn=self.conn))[0]

    def __repr__(self) -> str:
        options = [
            f"{field.name}={getattr(self.spec, field.name)!r}"
            for field in dataclasses.fields(self.spec)
            if field.name not in ("task", "payload") and getattr(self.spec, field.name) is not None
        ]
        if self.conn is not None:
            options.append(f"conn=<{type(self.conn).__name__}>")  # its repr may name the server
        return " ".join([f"<Deferrer {self.task.name}", *options]) + ">"


def configure(task: Deferrable, options: Mapping[str, Any]) -> Deferrer[Any]:
    """`task` with `options`, each checked now and named in the error when it is wrong."""
    _refuse_unknown(options)
    fields = {name: value for name, value in options.items() if name != "conn"}
    spec = JobSpec(task.name, None, **fields)
    check_options(spec, task)
    return Deferrer(task, spec, options.get("conn"))


def payload_of(task: Deferrable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A job's payload from the arguments of `defer`: the keywords as given, and positional
    arguments under the names of the parameters they fill."""
    if not _OPTION_WORDS.isdisjoint(kwargs):
        _refuse_options(task, kwargs)
    if args:
        return {**_by_name(task, args, kwargs), **kwargs}
    return kwargs


def _refuse_unknown(options: Mapping[str, Any]) -> None:
    for old, new in RENAMED_OPTIONS.items():
        if old in options:
            raise ConfigError(f"the option `{old}` is now called `{new}`")
    for name in options:
        if name not in DEFER_OPTIONS:
            raise ConfigError(
                f"configure() has no option {name!r}{did_you_mean(name, DEFER_OPTIONS)}"
            )


def _refuse_options(task: Deferrable, kwargs: dict[str, Any]) -> None:
    """Refuse option names the handler does not name (its `**kwargs` would take them)."""
    named = task.payload_shape.names
    stray = sorted(name for name in _OPTION_WORDS & kwargs.keys() if name not in named)
    if stray:
        name = stray[0]
        raise InvalidPayload(
            f"{task.name}.defer() got `{name}`, which is an enqueue option and not a parameter "
            f"of {task.name}: give options to configure, as in "
            f"{task.name}.configure({RENAMED_OPTIONS.get(name, name)}=...).defer(...)"
        )


def _by_name(task: Deferrable, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional arguments under their parameters' names: a payload is passed by keyword."""
    try:
        bound = task.payload_signature.bind_partial(*args)
    except TypeError as exc:
        raise InvalidPayload(f"{task.name}.defer(): {exc}") from None
    params = task.payload_signature.parameters
    for name in bound.arguments:
        if params[name].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise InvalidPayload(
                f"{task.name}.defer(): parameter {name!r} takes positional arguments only, "
                "which a payload cannot hold (a job passes its payload by keyword)"
            )
        if name in kwargs:
            raise InvalidPayload(f"{task.name}.defer() got {name!r} by position and by keyword")
    return bound.arguments
