"""The Metrics registry: counters per (queue, task), histograms, the store collector, exposition."""

from __future__ import annotations

import logging
import socket
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chronoq.core.jobs import Job, JobStatus, Outcome
from chronoq.errors import ConfigError, StoreUnavailable
from chronoq.observability.metrics import DURATION_BUCKETS, Metrics
from chronoq.storage.base import JobInsertParams, JobStore, ScheduleAdvance
from chronoq.storage.sqlite.store import SqliteStore

DUE = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)


def job(queue: str = "q", task: str = "t", late: float | None = 0.25) -> Job:
    """A claimed job that started `late` seconds after it was due (None: not started)."""
    started = None if late is None else DUE + timedelta(seconds=late)
    return Job(
        id=1,
        queue=queue,
        task=task,
        payload={},
        status=JobStatus.RUNNING,
        priority=0,
        run_at=DUE,
        attempts=1,
        max_attempts=3,
        lease_seconds=60.0,
        lease_token=1,
        locked_until=None,
        worker_id="w",
        key=None,
        errors=[],
        created_at=DUE,
        started_at=started,
        finished_at=None,
    )


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def families(text: bytes | str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric families by name: each sample's labels and value (what a scraper would read)."""
    body = text.decode() if isinstance(text, bytes) else text
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(body)
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield opened
    opened.close()


def test_job_counters_are_kept_apart_per_queue_and_task() -> None:
    metrics = Metrics()
    metrics.enqueued("mail", "send", 3)
    metrics.claimed([job("mail", "send"), job("mail", "send"), job("web", "hook")])
    metrics.finished(job("mail", "send"), Outcome.DONE)
    metrics.finished_many(
        [(job("mail", "send"), Outcome.RETRY), (job("web", "hook"), Outcome.DEAD)]
    )
    metrics.finished(job("web", "hook"), Outcome.CANCELLED)
    mail, web = {"queue": "mail", "task": "send"}, {"queue": "web", "task": "hook"}
    assert value(metrics, "chronoq_jobs_enqueued_total", **mail) == 3
    assert value(metrics, "chronoq_jobs_claimed_total", **mail) == 2
    assert value(metrics, "chronoq_jobs_claimed_total", **web) == 1
    assert value(metrics, "chronoq_jobs_completed_total", **mail) == 1
    assert value(metrics, "chronoq_jobs_retried_total", **mail) == 1
    assert value(metrics, "chronoq_jobs_dead_total", **web) == 1
    assert value(metrics, "chronoq_jobs_cancelled_total", **web) == 1
    # Every counter of a (queue, task) exists from its first event on, so rate() sees a 0.
    assert value(metrics, "chronoq_jobs_dead_total", **mail) == 0
    assert value(metrics, "chronoq_jobs_skipped_total", **mail) == 0


def test_lateness_is_due_to_start_on_the_database_clock_and_run_time_is_observed() -> None:
    metrics = Metrics()
    metrics.claimed([job(late=0.25), job(late=30.0), job(late=None)])
    metrics.ran("q", 0.004)
    metrics.ran("q", 700.0)
    assert value(metrics, "chronoq_job_lateness_seconds_count", queue="q") == 2
    assert value(metrics, "chronoq_job_lateness_seconds_sum", queue="q") == pytest.approx(30.25)
    assert value(metrics, "chronoq_job_lateness_seconds_bucket", queue="q", le="0.25") == 1
    assert value(metrics, "chronoq_job_run_seconds_bucket", queue="q", le="0.005") == 1
    assert value(metrics, "chronoq_job_run_seconds_bucket", queue="q", le="600.0") == 1
    assert value(metrics, "chronoq_job_run_seconds_bucket", queue="q", le="+Inf") == 2
    assert DURATION_BUCKETS[0] == 0.005 and DURATION_BUCKETS[-1] == 600.0


def test_fleet_counters() -> None:
    metrics = Metrics()
    metrics.fenced("finish")
    metrics.fenced("heartbeat")
    metrics.fenced("heartbeat")
    metrics.lease_expired("rescuer", 4)
    metrics.lease_expired("worker")
    metrics.lease_expired("rescuer", 0)
    metrics.leader_changed("scheduler", leading=True)
    assert value(metrics, "chronoq_leader", duty="scheduler") == 1
    metrics.leader_changed("scheduler", leading=False)
    metrics.schedule_advanced("nightly", ScheduleAdvance(inserted=3, late=2, skipped=5))
    metrics.schedule_advanced("nightly", ScheduleAdvance(inserted=1))
    assert value(metrics, "chronoq_fencing_rejections_total", kind="finish") == 1
    assert value(metrics, "chronoq_fencing_rejections_total", kind="heartbeat") == 2
    assert value(metrics, "chronoq_lease_expiries_total", source="rescuer") == 4
    assert value(metrics, "chronoq_lease_expiries_total", source="worker") == 1
    assert value(metrics, "chronoq_leader_changes_total", duty="scheduler") == 2
    assert value(metrics, "chronoq_leader", duty="scheduler") == 0
    assert value(metrics, "chronoq_schedule_fires_total", schedule="nightly") == 4
    assert value(metrics, "chronoq_schedule_late_ticks_total", schedule="nightly") == 2
    assert value(metrics, "chronoq_schedule_skipped_ticks_total", schedule="nightly") == 5


def test_each_metrics_has_a_registry_of_its_own() -> None:
    first, second = Metrics(), Metrics()
    first.enqueued("q", "t")
    assert value(first, "chronoq_jobs_enqueued_total", queue="q", task="t") == 1
    assert value(second, "chronoq_jobs_enqueued_total", queue="q", task="t") is None


def test_render_is_the_prometheus_text_format() -> None:
    metrics = Metrics()
    metrics.enqueued("q", "t", 2)
    metrics.ran("q", 0.1)
    parsed = families(metrics.render())
    assert ({"queue": "q", "task": "t"}, 2.0) in parsed["chronoq_jobs_enqueued"]
    assert "chronoq_job_run_seconds" in parsed
    assert metrics.content_type.startswith("text/plain")


def test_the_store_collector_reads_queue_depths_at_scrape_time(store: SqliteStore) -> None:
    metrics = Metrics()
    metrics.watch_store(lambda: store)
    later = DUE + timedelta(days=365 * 50)
    store.job_insert_many(
        [
            JobInsertParams("mail", "send", "{}", delay_seconds=0),
            JobInsertParams("mail", "send", "{}", run_at=later),
            JobInsertParams("web", "hook", "{}"),
        ]
    )
    assert value(metrics, "chronoq_store_up") == 1
    assert value(metrics, "chronoq_queue_depth", queue="mail", state="pending") == 2
    assert value(metrics, "chronoq_queue_depth", queue="mail", state="due") == 1
    assert value(metrics, "chronoq_queue_depth", queue="web", state="running") == 0
    age = value(metrics, "chronoq_queue_oldest_due_age_seconds", queue="mail")
    assert age is not None and age >= 0


def test_a_failing_store_reports_down_and_logs_once(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    failing = True

    def source() -> JobStore:
        if failing:
            raise StoreUnavailable("the database cannot be reached")
        return store

    metrics = Metrics()
    metrics.watch_store(source)
    with caplog.at_level(logging.INFO, logger="chronoq.metrics"):
        for _ in range(3):
            parsed = families(metrics.render())  # never raises
            assert parsed["chronoq_store_up"] == [({}, 0.0)]
            assert "chronoq_queue_depth" not in parsed
        failing = False
        assert value(metrics, "chronoq_store_up") == 1
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "cannot read queue metrics from the store: the database cannot be reached",
        "the store answers again",
    ]
    assert caplog.records[0].exc_info is None  # an outage, not a bug: no traceback


def test_an_unexpected_error_in_a_scrape_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> JobStore:
        raise RuntimeError("bug")

    metrics = Metrics()
    metrics.watch_store(broken)
    with caplog.at_level(logging.ERROR, logger="chronoq.metrics"):
        assert value(metrics, "chronoq_store_up") == 0
    [record] = caplog.records
    assert record.exc_info is not None


def test_serve_exposes_metrics_over_http_until_closed() -> None:
    metrics = Metrics()
    metrics.enqueued("q", "t")
    port = metrics.serve(0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read()
        parsed = families(body)
        assert ({"queue": "q", "task": "t"}, 1.0) in parsed["chronoq_jobs_enqueued"]
        with pytest.raises(ConfigError, match="already running"):
            metrics.serve(0)
    finally:
        metrics.close()
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", port), timeout=1),
    ):
        pass


def test_serve_on_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            Metrics().serve(port)
