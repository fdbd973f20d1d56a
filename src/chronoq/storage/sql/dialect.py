"""The dialect hooks: what each SQL store supplies for the parts of `chronoq.storage.sql`.

A part (`JobsSql`, `QueuesSql`, ...) runs named blocks of the dialect's `.sql` files through
these hooks; `SqlStore` (chronoq.storage.sqlstore) composes the parts, and each store
(`SqliteStore`, `PostgresStore`) implements the hooks once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, LiteralString, Protocol

from chronoq.core.jobs import Job, JobProgress
from chronoq.core.schedules import Schedule
from chronoq.storage.base import JobLeaseRef


class Connection(Protocol):
    """What both drivers' connections answer: one statement with named arguments, returning a
    cursor (`fetchone`, `fetchall`, `rowcount`, iteration)."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class SqlDialect(ABC):
    """The hooks every part of the shared SQL store runs on (see chronoq.storage.sqlstore)."""

    Q: ClassVar[Mapping[str, LiteralString]]

    MIGRATIONS: ClassVar[str]  # the package holding the dialect's migrations/ folder

    # -- connections ------------------------------------------------------------------------

    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Connection]: ...

    # -- values -----------------------------------------------------------------------------

    @abstractmethod
    def _clock(self) -> Any:
        """The `now` argument of a statement that reads the clock."""

    @abstractmethod
    def _pinned(self, moment: datetime | None) -> Any:
        """The `now` argument of a statement a test may pin to `moment`."""

    @abstractmethod
    def _time_arg(self, moment: datetime | None) -> Any: ...

    @abstractmethod
    def _seconds_arg(self, seconds: float) -> Any:
        """A span of time as the dialect adds it to a stored time."""

    @abstractmethod
    def _array(self, values: Sequence[Any]) -> Any: ...

    @abstractmethod
    def _time(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def _list(self, value: Any) -> list[Any]:
        """An array column (or an aggregate) as a list."""

    @abstractmethod
    def _job(self, row: Mapping[str, Any]) -> Job: ...

    @abstractmethod
    def _schedule(self, row: Mapping[str, Any]) -> Schedule: ...

    @abstractmethod
    def _run_script(self, db: Connection, script: LiteralString) -> None: ...

    # -- fenced writes ----------------------------------------------------------------------

    @abstractmethod
    def _fenced_rows(self, query: str, refs: Sequence[JobLeaseRef], **extra: Any) -> list[Any]:
        """Run `query` over the attempts `refs` name; the rows it returns (one per attempt
        whose token still held), the refused ones counted as fence rejections."""

    @staticmethod
    @abstractmethod
    def _refs_args(refs: Sequence[JobLeaseRef]) -> dict[str, Any]:
        """The arguments naming `refs` (ids and lease tokens) in the dialect's statements."""

    @abstractmethod
    def _progress_args(
        self, refs: Sequence[JobLeaseRef], progress: Mapping[int, JobProgress]
    ) -> dict[str, Any]:
        """The arguments carrying each attempt's progress (or none) in a heartbeat."""

    @abstractmethod
    def _lock_migrations(self, db: Connection) -> None:
        """Serialise concurrent migrations (a no-op where the transaction does already)."""
