"""The Lua scripts of the timer tier, read once from `lua/*.lua` and registered on a client.

A registered script runs by EVALSHA; when Redis does not know it (a restart, SCRIPT FLUSH) the
client loads it again and retries, so a restart costs one SCRIPT LOAD per script. The scripts
that mutate a partition start with `fence.lua`, the one epoch rule they all apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from redis.commands.core import Script

from chronoq.tier.redis.connection import Client

_PACKAGE = "chronoq.tier.redis"


def lua_source(name: str) -> str:
    """The text of `lua/<name>.lua`."""
    return resources.files(_PACKAGE).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def fenced_source(name: str) -> str:
    """`lua/<name>.lua` after the epoch fence it relies on."""
    return f"{lua_source('fence')}\n{lua_source(name)}"


@dataclass(frozen=True, slots=True)
class TimerScripts:
    take_over: Script
    stage: Script
    move: Script
    trim: Script


def register_timer_scripts(client: Client) -> TimerScripts:
    return TimerScripts(
        take_over=client.register_script(lua_source("take_over")),
        stage=client.register_script(fenced_source("stage")),
        move=client.register_script(fenced_source("move")),
        trim=client.register_script(fenced_source("trim")),
    )
