"""The hook an enqueue is traced through, when an app has one (`App.tracing`).

`chronoq.otel.instrument(app)` sets it; without it an enqueue pays one attribute test, and
nothing of OpenTelemetry is imported. The hook wraps the store's insert: it opens the enqueue's
span, stamps each job with the span's trace context (`JobInsertParams.trace_context`, stored
with the job so that its attempts, in any process and on any retry, can link to it), and is
told the ids the insert returned.

```
 App._insert_many ──► tracer.sending(jobs) ──► store insert ──► sent(results) ──► span ends
                        span starts, jobs stamped          ids, created flags
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from chronoq.storage.base import JobInsertParams, JobInsertResult

Sent = Callable[[Sequence[JobInsertResult]], None]


class EnqueueTracer(Protocol):
    def sending(self, jobs: Sequence[JobInsertParams]) -> AbstractContextManager[Sent]:
        """A span around the insert of `jobs`, stamping them with its trace context before the
        insert; what it yields takes the insert's results. An exception inside ends the span
        in error and goes on."""
        ...
