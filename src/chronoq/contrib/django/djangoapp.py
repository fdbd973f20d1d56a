"""The App of a Django project: built from `settings.CHRONOQ`, it enqueues in Django's own
transaction and gives each job's thread fresh database connections.

```
 view / signal / shell                         manage.py chronoq worker
   with transaction.atomic():                    handler thread: close_old_connections()
       send_email.defer(to=...)  ─┐                 handler (ORM reads and writes)
       order.save()               │ same psycopg    close_old_connections()  (middleware.py)
                                  ▼ connection
   Django's connection ── INSERT chronoq_jobs ── COMMIT: job and order, or neither
```

Enqueue without `conn` runs its INSERT on the connection of the Django database alias
(`settings.CHRONOQ["DATABASE"]`), inside `transaction.atomic(savepoint=False)`: in an atomic
block it joins that block (a savepoint rolled back takes the job with it), outside one it commits
at once, as an ORM save would. This holds when chronoq lives in that database (no
`settings.CHRONOQ["DSN"]`); with a DSN of its own, enqueue uses chronoq's connections.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from chronoq.app import App
from chronoq.config import Config
from chronoq.contrib.django.middleware import DjangoConnections
from chronoq.contrib.django.settings import ChronoqSettings, database_dsn
from chronoq.core.enqueue import Enqueued, JobSpec
from chronoq.storage import JobStore
from chronoq.storage.base import JobInsertParams
from chronoq.worker.middleware import HandlerMiddleware


class DjangoApp(App):
    """An `App` whose enqueue joins Django's transaction and whose handlers may use the ORM."""

    # Handlers run between two checks of the thread's database connections.
    middleware: Sequence[HandlerMiddleware] = (DjangoConnections(),)

    def __init__(self, settings: ChronoqSettings) -> None:
        dsn = settings.dsn or database_dsn(settings.database)
        super().__init__(config=Config.load(dsn=dsn, **settings.app_settings))
        self.django = settings

    @property
    def store(self) -> JobStore:
        # The database's settings are read again when the store opens: a test runner switches
        # them to its test database after the App is built.
        if self._store is None and self.django.joins_django:
            with self._store_lock:
                if self._store is None:
                    self.config = self.config.with_dsn(database_dsn(self.django.database))
        return super().store

    # -- enqueue in Django's transaction ------------------------------------------------------

    def _insert_joined(self, params: list[JobInsertParams]) -> list[Enqueued]:
        if not self.django.joins_django:
            return super()._insert_joined(params)
        alias = self.django.database
        with transaction.atomic(using=alias, savepoint=False):
            raw = connections[alias].connection  # opened by atomic
            return self._insert_traced(params, lambda: self.store.job_insert_many(params, conn=raw))

    def _insert_stream(self, params: Iterator[JobInsertParams]) -> list[Enqueued]:
        if not self.django.joins_django:
            return super()._insert_stream(params)
        return self._insert_joined(list(params))

    async def enqueue_many_async(
        self, specs: Iterable[JobSpec], *, conn: Any = None
    ) -> list[Enqueued]:
        if conn is not None or not self.django.joins_django:
            return await super().enqueue_many_async(specs, conn=conn)
        # Django's async ORM runs on its one thread-sensitive thread; enqueue joins the same
        # connection, so a job enqueued in a view's atomic block shares its transaction.
        specs = list(specs)
        return await sync_to_async(self.enqueue_many, thread_sensitive=True)(specs)
