"""How the JSON API answers what it refuses: one body, `{"error": {"type", "message", "field"}}`,
for every error, whoever raised it.

```
 ApiError                 raised by a route: its own status, type, message and field
 FieldError               a value `fields` could not read: 422, naming it
 RequestValidationError   FastAPI's checks of the request: 422, the first error's field as a path
 HTTPException            no such route (404), method (405), a body that is not JSON (422)
 ChronoqError             the admin API, the app or the store:
   NotFound                 404   (field: `job_id` for a job, else `name`)
   Conflict, KeyConflict    409   (field: `name`, `key`; none for a job that has ended)
   StoreUnavailable         503   "database unavailable" (the store's words go to the log)
   input errors             422 or 413, naming the field at fault
   anything else            500
```
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from chronoq.core.enqueue import RENAMED_OPTIONS
from chronoq.core.validate import check_schedule_name
from chronoq.errors import (
    ChronoqError,
    ConfigError,
    Conflict,
    EnqueueError,
    InvalidDuration,
    InvalidPayload,
    JobFinished,
    JobNotFound,
    KeyConflict,
    NaiveDatetime,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
    UnknownQueue,
    UnknownTask,
)
from chronoq.http import fields
from chronoq.http.fields import FieldError
from chronoq.storage.dsn import redact

STORE_UNAVAILABLE = "database unavailable"
log = logging.getLogger("chronoq.http")


class ApiError(Exception):
    """An error response: status, kind, message and the input at fault."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        field: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.field = status, kind, message, field
        self.headers = dict(headers or {})


_FIELD_OF_ERROR: tuple[tuple[type[ChronoqError], str], ...] = (
    (UnknownTask, "task"),
    (UnknownQueue, "queue"),
    (NaiveDatetime, "run_at"),
    (InvalidPayload, "payload"),
    (PayloadTooLarge, "payload"),
)
_FIELDS = (
    "unique_for",
    "misfire_grace",
    "max_attempts",
    "rate_key",
    "priority",
    "misfire",
    "payload",
    "queue",
    "delay",
    "task",
    "key",
    "run_at",
)


def input_error(exc: ChronoqError, where: str) -> ApiError:
    status = 413 if isinstance(exc, PayloadTooLarge) else 422
    field = next((f for kind, f in _FIELD_OF_ERROR if isinstance(exc, kind)), None)
    if field is None:
        text = str(exc)
        field = next((f for f in _FIELDS if _names(text, f)), None)
        if field is None and isinstance(exc, InvalidDuration):
            field = "delay"
    return ApiError(status, type(exc).__name__, str(exc), f"{where}{field}" if field else None)


def _names(message: str, field: str) -> bool:
    """Does an error message start by naming `field` (as `misfire_grace` or "misfire grace")?"""
    spoken = field.replace("_", " ")
    return message.startswith((field, spoken)) or f"`{field}`" in message


def install_error_handlers(server: FastAPI) -> None:
    server.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    server.add_exception_handler(FieldError, _field_error)  # type: ignore[arg-type]
    server.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    server.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    server.add_exception_handler(ChronoqError, _chronoq_error)  # type: ignore[arg-type]


def error_response(status: int, kind: str, message: str, field: str | None) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, "field": field}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    response = error_response(exc.status, exc.kind, exc.message, exc.field)
    response.headers.update(exc.headers)
    return response


def _field_error(request: Request, exc: FieldError) -> JSONResponse:
    """A value read by `fields` that cannot be used: always the caller's to fix."""
    return error_response(422, exc.kind, exc.message, exc.field)


def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors, reduced to the first one, its field named as a path
    (`jobs[2].at`); the body keeps the others too."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    field = _location(first.get("loc", ()))
    if first.get("type") == "timezone_aware" and field:
        # The error the Python API and the CLI raise for the same mistake, with its message.
        return error_response(422, "NaiveDatetime", fields.naive_message(field), field)
    if first.get("type") == "json_invalid":
        return error_response(422, "MalformedJSON", _json_syntax(first), BODY)
    kind = "ValidationError"
    said = _renamed(first) if request.url.path.endswith(_JOB_BODIES) else None
    message = f"{field}: {said or first.get('msg', 'invalid')}" if field else str(first.get("msg"))
    response = error_response(422, kind, message, field)
    return response


_JOB_BODIES = ("/jobs", "/jobs/batch")  # the requests whose bodies hold JobIn fields
BODY = "body"  # the field of an error in the body as a whole: it is not JSON the API can read


def _json_syntax(error: Mapping[str, Any]) -> str:
    """FastAPI's "JSON decode error" at a character offset, as the decoder's own reason."""
    loc = error.get("loc") or ()
    reason = (error.get("ctx") or {}).get("error") or "it cannot be parsed"
    where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    return f"the body is not valid JSON: {reason}{where}"


def _renamed(error: Mapping[str, Any]) -> str | None:
    """For a field refused because it was renamed, the sentence that gives its new name."""
    loc = error.get("loc") or ("",)
    new = RENAMED_OPTIONS.get(loc[-1]) if error.get("type") == "extra_forbidden" else None
    return f"`{loc[-1]}` is now called `{new}`" if new else None


_WHERE = frozenset({"body", "query", "path", "header"})
# Names pydantic gives the members of a union (`float | str`): they are not fields.
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _location(loc: Sequence[Any]) -> str | None:
    parts = []
    for part in loc:
        if isinstance(part, str) and (not part.isidentifier() or part in _UNION_TAGS):
            break
        if part not in _WHERE:
            parts.append(part)
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    unparsable = _unparsable_json(exc)
    if unparsable:
        return error_response(422, "MalformedJSON", unparsable, BODY)
    if exc.status_code == 404 and (refused := _slashed_schedule_name(request)):
        return error_response(422, "ValidationError", refused, "name")
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    return error_response(exc.status_code, kind, str(exc.detail), None)


# /schedules/NAME[/action] as sent, before the server decoded %2F into a '/' no route matches.
_SLASHED_SCHEDULE = re.compile(
    r"/api/v1/schedules/([^/]*%2F[^/]*)(?:/(?:pause|resume|trigger))?", re.IGNORECASE
)


def _slashed_schedule_name(request: Request) -> str | None:
    """Why a schedule path whose name holds an encoded '/' found no route: such names are
    refused (`check_schedule_name`), so say that rather than 'not found'."""
    raw = request.scope.get("raw_path") or b""
    match = _SLASHED_SCHEDULE.fullmatch(raw.decode("latin-1"))
    if match is None:
        return None
    try:
        check_schedule_name(unquote(match[1]))
    except ConfigError as exc:
        return str(exc)
    return None


def log_store_unavailable(request: Request, exc: StoreUnavailable) -> None:
    """The store's own words, for the operator: they name the database's user, host, port and
    name, which are no business of a client's. The store shows its DSN masked already; masked
    again here in case a driver's message quotes one of its own."""
    log.warning(
        "%s %s: the store is unavailable: %s",
        request.method,
        request.url.path,
        redact(str(exc)),
        extra={"action": "http.store_unavailable"},
    )


def store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
    log_store_unavailable(request, exc)
    return error_response(503, type(exc).__name__, STORE_UNAVAILABLE, None)


def _unparsable_json(exc: StarletteHTTPException) -> str | None:
    """Why a body FastAPI could not parse is malformed JSON, when it is: FastAPI answers 400 to
    every error of the decoder but a syntax error, and three of those are the caller's: bytes
    that are not UTF-8, and JSON valid in grammar but past what Python's decoder takes (its
    recursion limit and its limit on the digits of an integer)."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        bad = cause.object[cause.start : cause.start + 1].hex()
        return f"the body is not valid JSON: byte 0x{bad} at byte {cause.start} is not UTF-8"
    if isinstance(cause, RecursionError):
        return "the JSON body is nested too deep"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return (
            f"the JSON body holds a number too long: at most {sys.get_int_max_str_digits()} digits"
        )
    return None


def _chronoq_error(request: Request, exc: ChronoqError) -> JSONResponse:
    """Errors the admin API, the app or the store raised past every check of the input: a
    name or id that matches nothing, a state that forbids the operation, a database that
    cannot be reached."""
    if isinstance(exc, NotFound | Conflict | KeyConflict):
        status = 404 if isinstance(exc, NotFound) else 409
        return error_response(status, type(exc).__name__, str(exc), _field_at_fault(exc))
    if isinstance(exc, StoreUnavailable):
        return store_unavailable(request, exc)
    if isinstance(exc, EnqueueError | ConfigError | InvalidDuration):
        api = input_error(exc, "")
        return error_response(api.status, api.kind, api.message, api.field)
    return error_response(500, type(exc).__name__, str(exc), None)


def _field_at_fault(exc: ChronoqError) -> str | None:
    """The input a 404 or 409 names: the job's id, a key, or the name in the path. A job that
    has ended is no fault of the id that names it."""
    if isinstance(exc, JobNotFound):
        return "job_id"
    if isinstance(exc, KeyConflict):
        return "key"
    return None if isinstance(exc, JobFinished) else "name"
