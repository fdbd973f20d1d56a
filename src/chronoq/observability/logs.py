"""Log output of the commands: the classic text lines, or one JSON object per line.

```
{"ts": "2030-01-31T09:00:00.123456Z", "level": "INFO", "logger": "chronoq.worker",
 "message": "job 42 send_email attempt 1/8 done in 0.012s", "process": 4711,
 "action": "job.done", "job_id": 42, "task": "send_email", "queue": "emails", "attempt": 1,
 "worker": "host:4711:ab12cd"}
```

Every `extra` field a record carries becomes a key. A record logged while a job runs (by the
handler, through any logger) gets that job's `job_id`, `task`, `queue` and `attempt` unless it
names them itself: the worker sets them in a context variable, which the handler's thread and
task inherit. A text line written for a handler ends with the same fields:

```
2030-01-31 09:00:00,123 INFO    myapp [4711]: sent  job_id=42 task=send_email queue=emails attempt=1
```

Which records are written (`--log-level LEVEL`):

```
                                 record level >= LEVEL   >= WARNING
  chronoq.* loggers                    written            written
  any logger, while a job runs         written            written
  any other logger (libraries)            -               written
```

The root logger is set to LEVEL so that the records of the handler's own loggers reach the
handler at all; the filter keeps libraries (asyncio, psycopg, uvicorn, ...) from becoming noisy
outside jobs, where nobody asked for their chatter. A logger whose level the app sets itself
keeps that level. A host program that set logging up keeps its handlers and its root level.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any, TextIO

from chronoq.core.jobs import Job

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(process)d]: %(message)s"
LOG_FORMATS = ("text", "json")

# The job whose handler runs in this context (None outside a job). The job itself is set, not
# its fields: that costs the worker nothing per job unless a line is actually written.
current_job: contextvars.ContextVar[Job | None] = contextvars.ContextVar(
    "chronoq_current_job", default=None
)

# What every LogRecord has of its own: anything else on a record came from `extra`.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_BASE_KEYS = ("ts", "level", "logger", "message", "process")
_JOB_KEYS = ("job_id", "task", "queue", "attempt")
# The logger of `JobContext.logger`: chronoq's name, but the handler's words.
HANDLER_LOGGER = "chronoq.job"


def job_fields(job: Job) -> dict[str, Any]:
    """The fields that identify a job attempt in a log line."""
    return {"job_id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempts}


def configure_logging(level: str, stream: TextIO, fmt: str = "text") -> None:
    """Log chronoq's records at `level` to `stream` as `fmt` ("text" or "json"), unless the
    host program already set logging up (its handlers are then left alone)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT))
        handler.addFilter(chronoq_or_job_records)
        root.addHandler(handler)
        root.setLevel(level.upper())
    logging.getLogger("chronoq").setLevel(level.upper())


def chronoq_or_job_records(record: logging.LogRecord) -> bool:
    """Below WARNING, only chronoq's records and those logged while a job runs (the table in
    the module docstring)."""
    return (
        record.levelno >= logging.WARNING
        or _is_chronoq(record.name)
        or current_job.get() is not None
    )


class TextFormatter(logging.Formatter):
    """The classic line; one written for a handler ends with its job's fields. chronoq's own
    lines about a job name it in their message already, so they get no suffix."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _handler_job_fields(record)
        if not fields:
            return line
        return line + "  " + " ".join(f"{key}={value}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (ISO 8601, UTC), level, logger, message, process, every
    `extra` field, the running job's fields, and `exc` / `stack` when the record has them."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _utc_iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        _add_extras(entry, record.__dict__)
        job = current_job.get()
        if job is not None and "job_id" not in entry:
            for key, value in job_fields(job).items():
                entry.setdefault(key, value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=_jsonable, ensure_ascii=False)


class JobLogAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter whose job fields are merged into each call's `extra` (the stock one
    replaces the caller's `extra` with its own)."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**kwargs.get("extra", {}), **(self.extra or {})}
        return msg, kwargs


def _handler_job_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The job fields of a record a handler logged: through `ctx.logger` (its `extra`) or any
    other logger while its job runs (the context variable); none for chronoq's own records."""
    if _is_chronoq(record.name) and record.name != HANDLER_LOGGER:
        return {}
    attributes = record.__dict__
    if "job_id" in attributes:
        return {key: attributes[key] for key in _JOB_KEYS if key in attributes}
    job = current_job.get()
    return job_fields(job) if job is not None else {}


def _is_chronoq(name: str) -> bool:
    return name == "chronoq" or name.startswith("chronoq.")


def _add_extras(entry: dict[str, Any], attributes: Mapping[str, Any]) -> None:
    for key, value in attributes.items():
        if key in _RECORD_FIELDS or key.startswith("_"):
            continue
        # An extra named like a base key is kept beside it, never over it.
        entry[f"{key}_" if key in _BASE_KEYS else key] = value


def _utc_iso(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _jsonable(value: object) -> object:
    """Values json cannot write: instants as ISO 8601, sets as sorted lists, the rest as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)
