from chronoq.storage.base import JobClaimParams, JobInsertParams


def test_insert_and_claim(store) -> None:
    [result] = store.job_insert_many([JobInsertParams("q", "t", "{}")])
    jobs = store.job_claim(JobClaimParams(["q"], 10, "w1"))
    assert [job.id for job in jobs] == [result.id]
