"""The single-duty elector shape that came before `PartitionElector` (attempt, resign, close)
keeps working, and says it is deprecated: `store.leader_elector`, the old methods on the new
electors, an old-shape elector given to a `Scheduler`, and the old names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import chronoq
from chronoq.coordination.base import LeaderTerm
from chronoq.scheduler.runner import Scheduler, SchedulerOptions
from chronoq.testing import SchedulerSignals, StaticElector
from tests.helpers import wait_until

from .support import DEADLINE, Store

DEPRECATED = pytest.warns(DeprecationWarning, match="deprecated")


def old_elector(store: Store, duty: str, holder: str, ttl: float = 30.0) -> object:
    with pytest.warns(DeprecationWarning, match=r"store\.leader_elector"):
        return store.leader_elector(duty, holder, ttl)


def attempt(elector: object) -> LeaderTerm | None:
    with pytest.warns(DeprecationWarning, match=r"attempt\(\)"):
        term: LeaderTerm | None = elector.attempt()  # type: ignore[attr-defined]
    return term


def resign(elector: object) -> None:
    with pytest.warns(DeprecationWarning, match=r"resign\(\)"):
        elector.resign()  # type: ignore[attr-defined]


def test_store_leader_elector_still_elects_one_candidate_until_it_resigns(store: Store) -> None:
    first, second = old_elector(store, "duty", "a"), old_elector(store, "duty", "b")
    try:
        term = attempt(first)
        assert term is not None and (term.duty, term.holder, term.term) == ("duty", "a", 1)
        assert attempt(second) is None
        renewed = attempt(first)
        assert renewed is not None and renewed.term == 1  # renewing keeps the term
        resign(first)
        taken = attempt(second)
        assert taken is not None and (taken.holder, taken.term) == ("b", 2)
        assert attempt(first) is None
    finally:
        first.close()  # type: ignore[attr-defined]
        second.close()  # type: ignore[attr-defined]


def test_the_test_kits_static_elector_keeps_its_old_methods() -> None:
    leader = StaticElector()
    term = attempt(leader)
    assert term is not None and (term.duty, term.holder, term.term) == ("scheduler", "static", 1)
    resign(leader)
    assert attempt(leader) is None
    with pytest.warns(DeprecationWarning, match=r"leader=False"):
        positional = StaticElector(False)  # type: ignore[arg-type]
    assert positional.step() == {} and positional.holder == "static"


class OldShape:
    """An elector written for the old port: leads from its first attempt, forever."""

    def __init__(self) -> None:
        self.holder = "old-shape"
        self.closed = False
        self._since = datetime.now(UTC)

    def attempt(self) -> LeaderTerm | None:
        now = datetime.now(UTC)
        return LeaderTerm("scheduler", self.holder, 7, self._since, now, now + timedelta(1))

    def resign(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Elected(SchedulerSignals):
    def __init__(self) -> None:
        self.terms: list[LeaderTerm] = []
        self.once = threading.Event()

    def elected(self, term: LeaderTerm) -> None:
        self.terms.append(term)
        self.once.set()


@pytest.fixture
def app(sqlite_dsn: str) -> Iterator[chronoq.App]:
    opened = chronoq.App(sqlite_dsn)
    yield opened
    opened.close()


def test_a_scheduler_still_runs_on_an_old_shape_elector(app: chronoq.App) -> None:
    old, signals = OldShape(), Elected()
    with DEPRECATED:
        scheduler = Scheduler(app, SchedulerOptions(), elector=old, observers=[signals])
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        assert signals.once.wait(DEADLINE), "the scheduler was never elected"
        wait_until(lambda: scheduler.is_leader, timeout=DEADLINE, what="the scheduler to lead")
    finally:
        scheduler.request_stop()
        thread.join(DEADLINE)
    assert [(term.holder, term.term) for term in signals.terms] == [("old-shape", 7)]
    assert old.closed


def test_the_old_names_still_import() -> None:
    from chronoq.storage import base

    assert base.LeaderTerm is LeaderTerm
    with DEPRECATED:
        from chronoq.storage.base import LeaderElector  # noqa: F401
