"""Contract: job output stored by the fenced completion, progress carried by fenced heartbeats,
and the finish listener that wakes `App.wait`."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest

from chronoq.core.jobs import JobProgress, JobStatus, Outcome
from chronoq.storage.base import JobFinishParams, JobPruneParams, JobRescueParams

from .support import (
    DEADLINE,
    Store,
    caller_connection,
    claim_one,
    get,
    insert,
    open_store,
    params,
    ref,
)

OUTPUT = {"files": 8, "names": ["a.txt", "ü.txt"], "ok": True, "ratio": 0.5, "none": None}


def _done(store: Store, job_id: int, token: int, output: object) -> set[int]:
    text = None if output is None else json.dumps(output)
    return store.job_finish_many([JobFinishParams(job_id, token, Outcome.DONE, output_json=text)])


def test_a_done_outcome_stores_its_output(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert _done(store, job_id, job.lease_token, OUTPUT) == {job_id}
    stored = get(store, job_id)
    assert stored.status is JobStatus.DONE
    assert stored.output == OUTPUT
    assert stored.to_json()["output"] == OUTPUT


@pytest.mark.parametrize("output", ["text", 42, 1.5, [1, "two"], False, {}])
def test_any_json_value_is_an_output(store: Store, output: object) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert _done(store, job_id, job.lease_token, output) == {job_id}
    assert get(store, job_id).output == output


def test_a_job_without_output_has_none(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert _done(store, job_id, job.lease_token, None) == {job_id}
    assert get(store, job_id).output is None
    assert get(store, job_id).to_json()["output"] is None


def test_a_stale_tokens_completion_does_not_store_its_output(store: Store) -> None:
    """The first attempt's lease lapses and the job is claimed again: the first worker's late
    completion, output and all, is refused; the second attempt's is stored."""
    [job_id] = insert(store, params(lease_seconds=0.001))
    stale = claim_one(store)
    rescued = store.job_rescue_expired(JobRescueParams(now=stale.started_at + timedelta(hours=1)))
    assert job_id in rescued.requeued
    fresh = claim_one(store, worker_id="w2")
    assert _done(store, job_id, stale.lease_token, {"from": "stale"}) == set()
    assert get(store, job_id).output is None
    assert get(store, job_id).fence_rejections == 1
    assert _done(store, job_id, fresh.lease_token, {"from": "fresh"}) == {job_id}
    assert get(store, job_id).output == {"from": "fresh"}


def test_an_output_beside_another_outcome_is_not_stored(store: Store) -> None:
    [job_id] = insert(store, params(max_attempts=1))
    job = claim_one(store)
    finish = JobFinishParams(job_id, job.lease_token, Outcome.DEAD, output_json='{"x": 1}')
    assert store.job_finish_many([finish]) == {job_id}
    assert get(store, job_id).output is None


def test_outputs_of_a_batch_go_to_their_own_jobs(store: Store) -> None:
    ids = insert(store, params(), params(), params())
    jobs = [claim_one(store) for _ in ids]
    batch = [
        JobFinishParams(job.id, job.lease_token, Outcome.DONE, output_json=json.dumps(job.id))
        for job in jobs
    ]
    assert store.job_finish_many(batch) == set(ids)
    assert [get(store, job_id).output for job_id in ids] == ids


def test_complete_in_stores_the_output_with_the_callers_transaction(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    with caller_connection(store) as conn:
        assert store.job_complete_in(conn, ref(job), json.dumps(OUTPUT))
        conn.rollback()
    assert get(store, job_id).output is None
    with caller_connection(store) as conn:
        assert store.job_complete_in(conn, ref(job), json.dumps(OUTPUT))
        conn.commit()
    assert get(store, job_id).output == OUTPUT


def test_output_is_pruned_with_its_job(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert _done(store, job_id, job.lease_token, OUTPUT) == {job_id}
    assert store.job_prune(JobPruneParams(older_than=timedelta(0))) == 1
    assert store.job_get(job_id) is None


# -- progress -------------------------------------------------------------------------------


def test_a_heartbeat_stores_the_progress_it_carries(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    result = store.job_heartbeat_many([ref(job)], {job_id: JobProgress(0.4, "3 of 8 files")})
    assert result.renewed == {job_id}
    stored = get(store, job_id)
    assert (stored.progress, stored.progress_note) == (0.4, "3 of 8 files")
    assert stored.to_json()["progress"] == 0.4
    assert stored.to_json()["progress_note"] == "3 of 8 files"


def test_a_heartbeat_without_progress_keeps_the_last_one(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    store.job_heartbeat_many([ref(job)], {job_id: JobProgress(0.25)})
    store.job_heartbeat_many([ref(job)])
    assert (get(store, job_id).progress, get(store, job_id).progress_note) == (0.25, None)


def test_progress_goes_to_its_own_attempt_in_a_batch(store: Store) -> None:
    first, second = insert(store, params(), params())
    jobs = [claim_one(store), claim_one(store)]
    progress = {second: JobProgress(1.0, "all")}
    assert store.job_heartbeat_many([ref(j) for j in jobs], progress).renewed == {first, second}
    assert get(store, first).progress is None
    assert (get(store, second).progress, get(store, second).progress_note) == (1.0, "all")


def test_a_stale_tokens_progress_is_discarded(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=0.001))
    stale = claim_one(store)
    store.job_rescue_expired(JobRescueParams(now=stale.started_at + timedelta(hours=1)))
    claim_one(store, worker_id="w2")
    result = store.job_heartbeat_many([ref(stale)], {job_id: JobProgress(0.9, "stale")})
    assert result.renewed == set()
    assert get(store, job_id).progress is None


def test_a_retry_and_a_rescue_clear_the_progress(store: Store) -> None:
    [job_id] = insert(store, params(lease_seconds=0.001))
    job = claim_one(store)
    store.job_heartbeat_many([ref(job)], {job_id: JobProgress(0.5, "half")})
    retry = JobFinishParams(job_id, job.lease_token, Outcome.RETRY, 0.0)
    assert store.job_finish_many([retry]) == {job_id}
    assert (get(store, job_id).progress, get(store, job_id).progress_note) == (None, None)
    again = claim_one(store)
    store.job_heartbeat_many([ref(again)], {job_id: JobProgress(0.5, "half")})
    store.job_rescue_expired(JobRescueParams(now=again.started_at + timedelta(hours=1)))
    assert (get(store, job_id).progress, get(store, job_id).progress_note) == (None, None)


def test_a_done_job_keeps_its_last_progress(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    store.job_heartbeat_many([ref(job)], {job_id: JobProgress(0.75, "nearly")})
    assert _done(store, job_id, job.lease_token, 1) == {job_id}
    assert get(store, job_id).progress == 0.75


# -- the finish listener ------------------------------------------------------------------


def test_the_finish_listener_wakes_when_another_connection_finishes_a_watched_job(
    store: Store,
) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    listener = store.open_finish_listener()
    store.job_watch(job_id)
    woke: list[bool] = []
    waiting = threading.Event()

    def wait() -> None:
        waiting.set()
        woke.append(listener.wait(DEADLINE))

    try:
        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        assert waiting.wait(DEADLINE)
        other = open_store(store)
        try:
            assert _done(other, job_id, job.lease_token, None) == {job_id}
        finally:
            other.close()
        waiter.join(DEADLINE)
        assert woke == [True]
    finally:
        listener.close()


def test_the_finish_listener_wakes_for_the_cancel_of_a_watched_job(store: Store) -> None:
    [job_id] = insert(store)
    listener = store.open_finish_listener()
    store.job_watch(job_id)
    try:
        cancelled = store.job_cancel(job_id)
        assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
        assert listener.wait(DEADLINE) is True
    finally:
        listener.close()


def test_watching_a_job_that_ended_or_never_was_changes_nothing(store: Store) -> None:
    [job_id] = insert(store)
    job = claim_one(store)
    assert _done(store, job_id, job.lease_token, None) == {job_id}
    before = get(store, job_id)
    store.job_watch(job_id)
    store.job_watch(job_id + 1000)
    store.job_watch(2**70)  # past any id a store keeps
    assert get(store, job_id) == before
    assert store.job_get(job_id + 1000) is None


def test_the_finish_listener_stays_quiet_without_changes(store: Store) -> None:
    listener = store.open_finish_listener()
    try:
        assert listener.wait(0) is False
    finally:
        listener.close()
