"""`chronoq worker` freezes the garbage collector's view of what its process holds at start
(`WorkerOptions.freeze_gc`), so that the full collections a busy worker triggers every few
seconds walk only the objects made since; a Worker that a program runs itself leaves the
collector as the program set it."""

from __future__ import annotations

import gc
from collections.abc import Callable

import chronoq
from chronoq.testing import drain
from tests.integration.cli_support import Spawner, enqueue

FREEZE_APP = """
import gc

import chronoq

app = chronoq.App()


@app.task
def frozen_objects() -> int:
    return gc.get_freeze_count()
"""


def test_the_commands_worker_runs_with_the_objects_of_its_start_frozen(
    sqlite_dsn: str, write_app: Callable[[str], str], spawner: Spawner
) -> None:
    spec = write_app(FREEZE_APP)
    job_id = enqueue(sqlite_dsn, "frozen_objects", "--app", spec)
    worker = spawner.start("worker", "--app", spec, "--dsn", sqlite_dsn, "--burst")
    assert spawner.wait(worker) == 0, spawner.log(worker)
    with chronoq.App(sqlite_dsn) as app:
        job = app.get_job(job_id)
    assert job is not None and job.status is chronoq.JobStatus.DONE, spawner.log(worker)
    # The modules, the app and the worker at least: thousands of objects.
    assert isinstance(job.output, int) and job.output > 10_000, job.output


def test_a_worker_a_program_runs_leaves_the_collector_alone(sqlite_dsn: str) -> None:
    frozen_before = gc.get_freeze_count()
    with chronoq.App(sqlite_dsn) as app:

        @app.task
        def count() -> int:
            return gc.get_freeze_count()

        [job] = app.enqueue_many([chronoq.JobSpec("count")])
        assert drain(app).done == 1
        stored = app.get_job(job.id)
    assert stored is not None and stored.output == frozen_before
    assert gc.get_freeze_count() == frozen_before
