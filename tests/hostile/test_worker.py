"""Rows a worker cannot run as they stand, written by another producer (or an older version of
the code), and handlers that fail with hostile messages: each job ends `dead` with the reason in
its errors, and the worker goes on with the rest. One burst per store runs every case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chronoq import JobContext, JobStatus
from chronoq.storage.base import JobInsertParams
from chronoq.testing import drain
from tests.hostile.support import HTML, SQL, Arena

QUEUE = "hostile-worker"

# (task, stored payload, error recorded, words of its message)
DEAD_LETTERS = [
    pytest.param(SQL, "{}", "UnknownTask", "not registered", id="unknown-sql"),
    pytest.param(HTML, "{}", "UnknownTask", "not registered", id="unknown-html"),
    pytest.param("🎉 e\u0301", "{}", "UnknownTask", "not registered", id="unknown-unicode"),
    pytest.param("n" * 200, "{}", "UnknownTask", "not registered", id="unknown-longest"),
    pytest.param("greet", "{}", "InvalidPayload", "missing 'name'", id="missing-argument"),
    pytest.param("greet", '{"name": "x", "nom": 1}', "InvalidPayload", "unexpected 'nom'", id="x"),
    pytest.param("greet", json.dumps({"name": 1, SQL: 2}), "InvalidPayload", "unexpected", id="s"),
    pytest.param("greet", '"text"', "InvalidPayload", "must be a JSON object, got str", id="str"),
    pytest.param(
        "greet",
        json.dumps(json.dumps({"name": "x"})),
        "InvalidPayload",
        "must be a JSON object, got str",
        id="object-in-a-string",
    ),
    pytest.param("greet", "[1, 2]", "InvalidPayload", "must be a JSON object, got list", id="list"),
    pytest.param("greet", "null", "InvalidPayload", "JSON object, got NoneType", id="null"),
    pytest.param("greet", "42", "InvalidPayload", "must be a JSON object, got int", id="number"),
    pytest.param("fail", '{"kind": "nul"}', "ValueError", "before \\x00 after", id="msg-nul"),
    pytest.param("fail", '{"kind": "surrogate"}', "ValueError", "\\udcff", id="msg-surrogate"),
    pytest.param("fail", '{"kind": "huge"}', "ValueError", "x" * 1000, id="msg-100k"),
]

MESSAGES = {"nul": "before \x00 after", "surrogate": "bad \udcff \ud800", "huge": "x" * 100_000}
ODD_KEYS = {SQL: 1, "": 2, "🎉": [HTML], "ctx": "not the context"}


def _register(arena: Arena, received: list[dict[str, Any]]) -> None:
    app = arena.app

    @app.task(queue=QUEUE)
    def greet(name: str) -> None: ...

    @app.task(queue=QUEUE, max_attempts=1)
    def fail(kind: str) -> None:
        raise ValueError(MESSAGES[kind])

    @app.task(queue=QUEUE)
    def sink(context: JobContext, **kwargs: Any) -> None:
        received.append(kwargs)


def test_rows_that_cannot_run_are_dead_lettered_with_the_reason(arena: Arena) -> None:
    received: list[dict[str, Any]] = []
    _register(arena, received)
    rows = [p.values for p in DEAD_LETTERS]
    inserted = arena.app.store.job_insert_many(
        [JobInsertParams(QUEUE, task, payload, max_attempts=1) for task, payload, *_ in rows]
        + [JobInsertParams(QUEUE, "sink", json.dumps(ODD_KEYS))]
    )
    stats = drain(arena.app, queues=[QUEUE])
    assert (stats.dead, stats.done) == (len(rows), 1)
    assert received == [ODD_KEYS]
    for result, case in zip(inserted, DEAD_LETTERS, strict=False):
        _, _, error, words = case.values
        job = arena.app.get_job(result.id)
        assert job is not None, case.id
        assert job.status is JobStatus.DEAD, case.id
        assert job.errors[-1]["error"] == error, case.id
        assert words in job.errors[-1]["message"], (case.id, job.errors[-1]["message"][:200])
    arena.assert_seeds_intact()
