"""Reading Redis replies that may come as bytes (the default) or str (decode_responses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string reply from Redis, got {value!r}")


def integer(value: object) -> int:
    if isinstance(value, int):
        return value
    return int(float(text(value)))  # a score reads "1700000000000" or "1.7e+12"


def optional_integer(value: object) -> int | None:
    if value is None or value in (b"", ""):
        return None
    return integer(value)


def as_list(value: Any) -> Sequence[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return value
    raise TypeError(f"expected an array reply from Redis, got {value!r}")
