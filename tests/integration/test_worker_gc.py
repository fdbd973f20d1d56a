"""`chronoq worker` tunes the garbage collector once its process has started
(`WorkerOptions.tune_gc`): what it then holds is frozen, so that the full collections a busy
worker triggers every few seconds walk only the objects made since, and the youngest
generation waits for 20,000 net allocations instead of 700. A Worker that a program runs
itself leaves the collector as the program set it."""

from __future__ import annotations

import gc
from collections.abc import Callable

import chronoq
from chronoq.testing import drain
from chronoq.worker.worker import YOUNG_COLLECTION_THRESHOLD
from tests.integration.cli_support import Spawner, enqueue

# The middle and oldest generations keep CPython's thresholds.
DEFAULT_OLDER = gc.get_threshold()[1:]

COLLECTOR_APP = """
import gc

import chronoq

app = chronoq.App()


@app.task
def collector() -> list[int]:
    return [gc.get_freeze_count(), *gc.get_threshold()]
"""


def test_the_commands_worker_runs_with_its_start_frozen_and_young_collections_spaced(
    sqlite_dsn: str, write_app: Callable[[str], str], spawner: Spawner
) -> None:
    spec = write_app(COLLECTOR_APP)
    job_id = enqueue(sqlite_dsn, "collector", "--app", spec)
    worker = spawner.start("worker", "--app", spec, "--dsn", sqlite_dsn, "--burst")
    assert spawner.wait(worker) == 0, spawner.log(worker)
    with chronoq.App(sqlite_dsn) as app:
        job = app.get_job(job_id)
    assert job is not None and job.status is chronoq.JobStatus.DONE, spawner.log(worker)
    frozen, young, middle, oldest = job.output
    # The modules, the app and the worker at least: thousands of objects.
    assert frozen > 10_000, job.output
    assert (young, middle, oldest) == (YOUNG_COLLECTION_THRESHOLD, *DEFAULT_OLDER), job.output


def test_a_worker_a_program_runs_leaves_the_collector_alone(sqlite_dsn: str) -> None:
    before = [gc.get_freeze_count(), *gc.get_threshold()]
    with chronoq.App(sqlite_dsn) as app:

        @app.task
        def collector() -> list[int]:
            return [gc.get_freeze_count(), *gc.get_threshold()]

        [job] = app.enqueue_many([chronoq.JobSpec("collector")])
        assert drain(app).done == 1
        stored = app.get_job(job.id)
    assert stored is not None and stored.output == before
    assert [gc.get_freeze_count(), *gc.get_threshold()] == before
