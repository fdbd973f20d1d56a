"""The helpers chronoq ships for users' own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import chronoq
from chronoq.testing import StaticElector, assert_enqueued, drain, enqueued, fire_schedules


def test_assert_enqueued_then_drain(tmp_path: Path) -> None:
    with chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}") as app:
        sent: list[str] = []

        @app.task(queue="emails")
        def send_email(to: str, subject: str) -> None:
            sent.append(to)

        send_email.defer(to="a@example.com", subject="hi")
        job = assert_enqueued(app, "send_email", to="a@example.com")
        assert job.payload["subject"] == "hi"
        with pytest.raises(AssertionError, match="no pending 'send_email' job"):
            assert_enqueued(app, "send_email", to="b@example.com")

        assert drain(app).done == 1
        assert sent == ["a@example.com"]
        assert enqueued(app, "send_email") == []
        assert [j.id for j in enqueued(app, statuses=[chronoq.JobStatus.DONE])] == [job.id]


def test_fire_schedules_runs_one_pass_of_the_cron_enqueuer(tmp_path: Path) -> None:
    with chronoq.App(f"sqlite:///{tmp_path / 'jobs.db'}") as app:

        @app.schedule("every 1s")
        @app.task
        def tick() -> None:
            pass

        assert isinstance(tick, chronoq.Task)  # the decorator gives back the task
        fired = fire_schedules(app)
        assert fired >= 4  # the ticks of the next five seconds are enqueued ahead
        jobs = enqueued(app, "tick")
        assert len(jobs) == fired
        assert all(job.schedule == "tick" and job.tick == job.run_at for job in jobs)
        fire_schedules(app)  # again: only ticks that entered the lookahead since are new
        ticks = [job.tick for job in enqueued(app, "tick")]
        assert len(ticks) == len(set(ticks)) >= len(jobs)


def test_a_static_elector_leads_or_never_does() -> None:
    leader = StaticElector()
    assert leader.holder == "static"
    assert list(leader.step()) == [0]  # the scheduler's one partition
    leader.leader = False
    assert leader.step() == {}
    assert StaticElector(leader=False).step() == {}
    assert list(StaticElector(holder="s1").step()) == [0]
