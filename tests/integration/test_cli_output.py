"""`chronoq jobs show`: a job's output once done, and the progress of a running attempt."""

from __future__ import annotations

import json

from chronoq import App
from chronoq.core.jobs import JobProgress, Outcome
from chronoq.storage.base import JobClaimParams, JobFinishParams, JobLeaseRef
from tests.integration.cli_support import enqueue, run_cli

HOSTILE = "[bold]not markup[/bold] <b>"


def test_jobs_show_prints_the_output_of_a_done_job(url: str, reader: App) -> None:
    job_id = enqueue(url, "report")
    [job] = reader.store.job_claim_with_wakeup(JobClaimParams(["default"], 1, "w")).jobs
    output = json.dumps({"rows": 3, "note": HOSTILE}, ensure_ascii=False)
    reader.store.job_finish_many(
        [JobFinishParams(job.id, job.lease_token, Outcome.DONE, output_json=output)]
    )
    shown = run_cli("jobs", "show", str(job_id), "--dsn", url, "--json")
    assert shown.code == 0
    assert shown.json()["output"] == {"rows": 3, "note": HOSTILE}
    human = run_cli("jobs", "show", str(job_id), "--dsn", url)
    assert human.code == 0
    assert '"rows": 3' in human.out and HOSTILE in human.out  # markup printed as written


def test_jobs_show_prints_the_progress_of_a_running_job(url: str, reader: App) -> None:
    job_id = enqueue(url, "copy")
    [job] = reader.store.job_claim_with_wakeup(JobClaimParams(["default"], 1, "w")).jobs
    reader.store.job_heartbeat_many(
        [JobLeaseRef(job.id, job.lease_token)], {job.id: JobProgress(0.4, "3 of 8 files")}
    )
    shown = run_cli("jobs", "show", str(job_id), "--dsn", url, "--json").json()
    assert (shown["progress"], shown["progress_note"], shown["output"]) == (
        0.4,
        "3 of 8 files",
        None,
    )
    human = run_cli("jobs", "show", str(job_id), "--dsn", url).out
    assert "40% (3 of 8 files)" in human
    assert "output" not in human  # not done: nothing to show yet
