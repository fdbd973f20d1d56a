"""Handler middleware: code that runs around every handler call, where the handler runs.

A framework's integration is one (`chronoq.contrib.django.DjangoConnections` closes a thread's
stale database connections before and after each job); an application's own could set up a
tenant or a logging context. An app lists its middleware in `App.middleware`, outermost first:

```
 Executor ─► middleware[0].call(next, *args, **payload)
                └► middleware[1].call(next, *args, **payload)
                      └► handler(*args, **payload)
```

A sync handler goes through `call`, on the worker's handler thread; an async one through
`call_async`, on the event loop. Without middleware the executor calls the handler itself: an
async handler is awaited with no extra coroutine a job.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

SyncCall = Callable[..., Any]
AsyncCall = Callable[..., Awaitable[Any]]


class HandlerMiddleware(Protocol):
    """Runs around each handler call; `handler(*args, **kwargs)` is the rest of the chain."""

    def call(self, handler: SyncCall, /, *args: Any, **kwargs: Any) -> Any: ...

    async def call_async(self, handler: AsyncCall, /, *args: Any, **kwargs: Any) -> Any: ...


def chain(middleware: Sequence[HandlerMiddleware]) -> Callable[..., Any]:
    """`run(fn, *args, **kwargs)`: a sync handler called through every middleware."""
    layers = tuple(reversed(middleware))

    def run(fn: SyncCall, /, *args: Any, **kwargs: Any) -> Any:
        call = fn
        for layer in layers:
            call = functools.partial(layer.call, call)
        return call(*args, **kwargs)

    return run


def chain_async(middleware: Sequence[HandlerMiddleware]) -> Callable[..., Awaitable[Any]] | None:
    """`run(fn, *args, **kwargs)`: an async handler awaited through every middleware; None
    when there is none, so the executor awaits the handler itself."""
    if not middleware:
        return None
    layers = tuple(reversed(middleware))

    def run(fn: AsyncCall, /, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        call = fn
        for layer in layers:
            call = functools.partial(layer.call_async, call)
        return call(*args, **kwargs)

    return run


class AppHooks:
    """The middleware of an App subclass that overrides `call_handler` or `call_handler_async`,
    as frameworks wrapped handlers before `App.middleware` (deprecated; kept working). The
    base methods run `App.middleware`, so an override that calls them keeps it too."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def call(self, handler: SyncCall, /, *args: Any, **kwargs: Any) -> Any:
        return self._owner.call_handler(handler, *args, **kwargs)

    async def call_async(self, handler: AsyncCall, /, *args: Any, **kwargs: Any) -> Any:
        return await self._owner.call_handler_async(handler, *args, **kwargs)
