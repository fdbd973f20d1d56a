"""The Lua scripts of the timer tier, read once from `lua/*.lua` and registered on a client.

A registered script runs by EVALSHA; when the server of its keys does not know it (a restart,
SCRIPT FLUSH, a promoted replica, its first use on a cluster node) it runs once by EVAL, which
also caches it there, so a restart costs one EVAL per script. Loading it only where its keys
live matters on a cluster: redis-py's own `Script` sends SCRIPT LOAD to every master, which
fails while any one of them is down, even for keys served by the others. The scripts that
mutate a partition start with `fence.lua`, the one epoch rule they all apply.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

from chronoq.tier.redis.connection import Client

_PACKAGE = "chronoq.tier.redis"


def lua_source(name: str) -> str:
    """The text of `lua/<name>.lua`."""
    return resources.files(_PACKAGE).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def fenced_source(name: str, *preludes: str) -> str:
    """`lua/<name>.lua` after the epoch fence it relies on, and any other `preludes`."""
    return "\n".join(lua_source(part) for part in ("fence", *preludes, name))


@dataclass(frozen=True, slots=True)
class Script:
    """One script on one client: EVALSHA, or EVAL where the server lacks it."""

    client: Client
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        # Redis names a script by the SHA-1 of its text: an identifier, not a security measure.
        digest = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()
        object.__setattr__(self, "sha", digest)

    def __call__(self, keys: Sequence[str], args: Sequence[int | str]) -> Any:
        run: Any = self.client  # redis-py types these replies as maybe awaitable
        try:
            return run.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return run.eval(self.source, len(keys), *keys, *args)


@dataclass(frozen=True, slots=True)
class TimerScripts:
    take_over: Script
    stage: Script
    move: Script
    trim: Script
    waiting: Script


def register_timer_scripts(client: Client) -> TimerScripts:
    return TimerScripts(
        take_over=Script(client, lua_source("take_over")),
        stage=Script(client, fenced_source("stage", "waits")),
        move=Script(client, fenced_source("move")),
        trim=Script(client, fenced_source("trim")),
        waiting=Script(client, f"{lua_source('waits')}\n{lua_source('waiting')}"),
    )
