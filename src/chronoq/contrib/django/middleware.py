"""The handler middleware of a Django project's App: fresh database connections for each job.

```
 handler thread: close_old_connections() ─► handler (the ORM) ─► close_old_connections()
 event loop:     the same, on Django's thread-sensitive thread, around an async handler
```
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from chronoq.worker.middleware import AsyncCall, SyncCall


class DjangoConnections:
    """Checks the thread's database connections before and after each job, as Django does
    around a request: a connection past CONN_MAX_AGE, broken, or left in a transaction by a
    failed job is not handed to the next job."""

    def call(self, handler: SyncCall, /, *args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return handler(*args, **kwargs)
        finally:
            close_old_connections()

    async def call_async(self, handler: AsyncCall, /, *args: Any, **kwargs: Any) -> Any:
        """An async handler's ORM calls (`aget`, `asave`, `sync_to_async`) run on Django's
        thread-sensitive thread: its connections are the ones checked."""
        await sync_to_async(close_old_connections, thread_sensitive=True)()
        try:
            return await handler(*args, **kwargs)
        finally:
            await sync_to_async(close_old_connections, thread_sensitive=True)()
