"""A worker whose PostgreSQL goes away and comes back, in both dispatch modes: it resumes within
a few seconds of the database's return.

The worker's app reaches PostgreSQL through a relay (tests.services.netfault) that stands for the
server going away: its connections are reset and new ones fail at once. The leader of the tiered
case and the test itself use the database directly, so what is timed is the worker's own return.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from chronoq import App, JobStatus, WorkerOptions
from tests.helpers import running_worker, wait_until
from tests.services.netfault import Link, Network
from tests.services.tier import leading, tiered_app

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]

# Long enough that psycopg_pool's own reconnection backoff (1, 2, 4, 8, 16, 32 s ...) has reached
# a 16 s wait before the database comes back: attempts at about 1, 3, 7, 15 and 31 s after the
# first failure, the next one only at about 63 s.
OUTAGE = float(os.environ.get("CHRONOQ_TEST_OUTAGE", "36"))
RESUMED_WITHIN = 10.0  # generous for a loaded 2-core machine; typically 1-3 s


@pytest.fixture
def network() -> Iterator[Network]:
    made = Network()
    yield made
    made.close()


def relayed_dsn(dsn: str, link: Link) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{link.port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) > 1 else host))


def pg_link(network: Network, dsn: str) -> Link:
    parts = urlsplit(dsn)
    return network.link(parts.hostname or "127.0.0.1", parts.port or 5432)


def add_task(app: App) -> None:
    @app.task(lease=5.0)
    def add(a: int, b: int) -> int:
        return a + b


def done(app: App, job_id: int) -> bool:
    job = app.get_job(job_id)
    return job is not None and job.status == JobStatus.DONE


def outage_then_resume(direct: App, worker_app: App, link: Link) -> float:
    """Run a job, take the database away for OUTAGE seconds with a job due, bring it back,
    enqueue a job: the seconds from the return to that job done. Each job runs once."""
    first = direct.enqueue("add", {"a": 1, "b": 1}).id
    wait_until(lambda: done(direct, first), what="the first job done")
    link.down()
    # Due while the worker's database is away: its claim (or, tiered, the confirmation of the
    # entry it reads at once) fails from the start of the outage.
    during = direct.enqueue("add", {"a": 2, "b": 2}).id
    # How long the database stays away: a length the test sets, not a wait for an event.
    threading.Event().wait(OUTAGE)
    link.heal()
    back = time.monotonic()
    after = direct.enqueue("add", {"a": 3, "b": 3}).id
    wait_until(lambda: done(direct, after), timeout=120, what="the job after the outage")
    took = time.monotonic() - back
    print(f"resumed {took:.1f}s after a {OUTAGE:.0f}s outage")
    wait_until(lambda: done(direct, during), timeout=30, what="the job due during the outage")
    for job_id in (first, during, after):
        job = direct.get_job(job_id)
        assert job is not None and job.attempts == 1
    return took


def test_a_db_dispatch_worker_resumes_soon_after_postgres_returns(
    pg_dsn: str, network: Network
) -> None:
    link = pg_link(network, pg_dsn)
    with App(pg_dsn) as direct, App(relayed_dsn(pg_dsn, link)) as worker_app:
        add_task(direct)
        add_task(worker_app)
        with running_worker(worker_app, WorkerOptions(concurrency=2, poll_interval=1.0)):
            took = outage_then_resume(direct, worker_app, link)
    assert took < RESUMED_WITHIN


def test_a_tiered_worker_resumes_soon_after_postgres_returns(
    pg_dsn: str, redis_url: str, redis_prefix: str, network: Network
) -> None:
    link = pg_link(network, pg_dsn)
    direct = tiered_app(pg_dsn, redis_url, redis_prefix)
    worker_app = tiered_app(relayed_dsn(pg_dsn, link), redis_url, redis_prefix)
    add_task(direct)
    add_task(worker_app)
    try:
        with (
            leading(direct, redis_url),
            running_worker(worker_app, WorkerOptions(concurrency=2, poll_interval=1.0)),
        ):
            took = outage_then_resume(direct, worker_app, link)
    finally:
        worker_app.close()
        direct.close()
    assert took < RESUMED_WITHIN
