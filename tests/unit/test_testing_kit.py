"""The helpers chronoq ships for users' own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import chronoq
from chronoq.testing import assert_enqueued, drain, enqueued


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
