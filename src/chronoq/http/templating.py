"""The dashboard's Jinja environment: templates loaded from the package, autoescaped (every name,
payload and error on a page came from someone else), undefined names an error rather than
blank, and the filters the pages format values with."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import jinja2

from chronoq.core.durations import format_duration

TRACEBACK_TAIL = 3  # traceback lines shown before the full one is unfolded


def _load_template(name: str) -> str | None:
    source = resources.files("chronoq.http").joinpath("templates").joinpath(name)
    return source.read_text(encoding="utf-8") if source.is_file() else None


def when(moment: datetime | str | None) -> str:
    """An instant as people read it at a glance: UTC, to the second."""
    if moment is None or moment == "":
        return "-"
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(text := moment)
        except ValueError:
            return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if 0 < value < 0.001:  # "0ms" would read as "on the dot"
        return "<1ms"
    return format_duration(timedelta(seconds=max(0.0, float(value))))


def per_minute(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def percent(fraction: float | None) -> str:
    """A progress fraction as people read it: `40%`."""
    return "-" if fraction is None else f"{fraction * 100:.0f}%"


def traceback_tail(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return "\n".join(lines[-TRACEBACK_TAIL:])


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        when=when,
        seconds=seconds,
        per_minute=per_minute,
        pretty_json=pretty_json,
        percent=percent,
        traceback_tail=traceback_tail,
    )
    return environment


TEMPLATES = _environment()


def render(template: str, **values: Any) -> str:
    """The HTML of one template, given every value it names."""
    return TEMPLATES.get_template(template).render(**values)
