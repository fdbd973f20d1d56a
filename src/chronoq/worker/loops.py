"""The event loop a worker process runs on.

uvloop runs the loop's own machinery (scheduling callbacks, polling sockets, waking from
threads) in C, where asyncio's runs it in Python; a worker pays that machinery for every job
(its task is scheduled, stepped and finished, and each claim and report returns from the I/O
thread). As uvicorn does, "auto" takes uvloop when it is installed (`chronoq[uvloop]`) and
asyncio's loop otherwise; "uvloop" insists on it, "asyncio" never uses it. Handlers see no
difference: tasks, timeouts and cancellation are asyncio's own on either loop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from chronoq.errors import ConfigError

if TYPE_CHECKING:  # the CLI's parser imports this module: no asyncio at its start-up
    import asyncio
    from collections.abc import Callable

    LoopFactory = Callable[[], asyncio.AbstractEventLoop]

EVENT_LOOPS: Final = ("auto", "asyncio", "uvloop")


def loop_factory(choice: str) -> LoopFactory | None:
    """The factory of the loop `choice` names (None: asyncio's default loop)."""
    check_event_loop(choice)
    if choice == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(
                "event loop 'uvloop' needs the uvloop package, which is not installed: "
                "pip install 'chronoq[uvloop]' (or choose 'auto' or 'asyncio')"
            ) from None
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def check_event_loop(choice: str) -> None:
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"event loop must be one of {', '.join(EVENT_LOOPS)}, got {choice!r}")
