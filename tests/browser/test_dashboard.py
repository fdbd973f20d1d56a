"""The dashboard in a real browser (Debian's Chromium), over a live server and a real worker:
sign in through the form, watch a job finish, requeue a dead job with the button, and see the
overview refresh itself. `CHRONOQ_SCREENSHOT=1` also writes docs/dashboard.png."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from chronoq.core.schedules import ScheduleSpec
from tests.browser.conftest import ADMIN, READER, TIMEOUT_MS, Live
from tests.browser.tasks import GATES, QUEUES
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
# Seconds over which the screenshot's jobs are spread, so its throughput chart has a shape.
SCREENSHOT_SPREAD = 45.0

expect.set_options(timeout=TIMEOUT_MS)


def sign_in(page: Page, token: str = ADMIN, start: str = "/") -> None:
    page.goto(start)
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".flash.ok")).to_contain_text("Signed in")


def test_sign_in_and_watch_a_job_finish(page: Page, live: Live) -> None:
    sign_in(page, start="/jobs")
    expect(page).to_have_url(f"{live.url}/jobs")
    # Due in two seconds: the page first shows it pending, then reloads itself when it is done.
    job = live.app.enqueue("send_email", {"to": "ada@example.com"}, delay="2s")
    page.goto(f"/jobs/{job.id}")
    status = page.locator("#job-status")
    expect(status).to_have_text("pending")
    expect(status).to_have_text("done")
    facts = page.locator(".facts").first
    expect(facts).to_contain_text("Queueemails")
    expect(facts).to_contain_text("Tasksend_email")
    expect(page.locator("pre.payload")).to_contain_text('"to": "ada@example.com"')


def test_requeue_a_dead_job_with_the_button(page: Page, live: Live, tmp_path: Path) -> None:
    flag = tmp_path / "processor-back"
    job = live.app.enqueue("charge", {"flag": str(flag), "amount": 42})
    sign_in(page)
    page.goto(f"/jobs/{job.id}")
    expect(page.locator("#job-status")).to_have_text("dead")
    attempt = page.locator("article.attempt")
    expect(attempt).to_contain_text("UpstreamError")
    expect(attempt).to_contain_text("card processor refused a charge of 42")

    flag.touch()  # the processor is back: the next run succeeds
    page.get_by_role("link", name="Dead letters").click()
    page.get_by_label(f"select job {job.id}").check()
    page.get_by_role("button", name="Requeue selected").click()
    expect(page.locator(".flash")).to_have_text(f"Requeued 1 job(s): {job.id}")
    expect(page.get_by_label(f"select job {job.id}")).to_have_count(0)

    page.goto(f"/jobs/{job.id}")
    expect(page.locator("#job-status")).to_have_text("done")
    # A requeued job starts its attempts afresh but keeps the story of the ones that failed.
    expect(page.locator(".facts").first).to_contain_text("Attempts1 of 1")
    expect(page.locator(".facts").nth(2)).to_contain_text("Lease token2")
    expect(attempt).to_have_count(1)


def test_a_reader_sees_no_buttons(page: Page, live: Live) -> None:
    live.app.enqueue("call_webhook", {"url": "https://down.example.com/hook"})
    live.signals.wait_for(lambda: bool(live.signals.finishes))
    sign_in(page, READER, start="/dead")
    expect(page.locator("table.grid tbody tr")).to_have_count(1)
    expect(page.get_by_role("button")).to_have_text(["Sign out", "Filter"])
    expect(page.locator("input[type=checkbox]")).to_have_count(0)


def test_overview_draws_and_refreshes_itself(page: Page, live: Live, tmp_path: Path) -> None:
    shooting = os.environ.get("CHRONOQ_SCREENSHOT") == "1"
    run_some_work(live, spread=SCREENSHOT_SPREAD if shooting else 0.0)
    sign_in(page)
    rows = page.locator("#queue-rows tr")
    expect(rows).to_have_count(len(QUEUES))
    expect(page.locator("#throughput-chart rect.done").first).to_be_visible()
    expect(page.locator("#throughput-chart rect.dead").first).to_be_visible()
    expect(page.locator("#lateness-chart rect.late").first).to_be_visible()

    # Changed behind the page's back: the table shows it without a reload.
    live.app.store.queue_pause("webhooks", True)
    webhooks = rows.filter(has_text="webhooks")
    expect(webhooks.locator(".badge")).to_have_text("paused")
    expect(webhooks.get_by_role("button")).to_have_text("Resume")
    expect(page.locator("#refresh-state")).to_contain_text("live")

    page.set_viewport_size({"width": 1360, "height": 600})
    page.reload()  # without the sign-in message
    expect(page.locator("#lateness-chart rect.late").first).to_be_visible()
    target = SCREENSHOT if shooting else tmp_path / "dashboard.png"
    page.screenshot(path=str(target), full_page=True)


def run_some_work(live: Live, spread: float) -> None:
    """Jobs on every queue, due over `spread` seconds, some failing for good; the webhooks
    queue is paused until half the emails are sent, so its backlog starts late."""
    live.app.store.queue_pause("webhooks", True)
    total = emails = 0
    for n in range(60):
        at = f"{spread * n / 60:.3f}s"
        live.app.enqueue("send_email", {"to": f"user{n}@example.com"}, delay=at)
        emails += 1
        if n % 2 == 0:
            url = f"https://{'down' if n % 7 == 0 else 'up'}.example.com/{n}"
            live.app.enqueue("call_webhook", {"url": url}, delay=at)
            total += 1
        if n % 5 == 0:
            live.app.enqueue("charge", {"flag": "/nonexistent", "amount": n}, delay=at)
            total += 1
    total += emails
    finishes = live.signals.finishes
    timeout = spread + 30
    live.signals.wait_for(
        lambda: sum(job.queue == "emails" for job, _, _ in finishes) >= emails // 2, timeout
    )
    live.app.store.queue_pause("webhooks", False)
    live.signals.wait_for(lambda: len(finishes) >= total, timeout)


def test_the_schedules_table_stays_inside_its_card(page: Page, live: Live) -> None:
    wide = [
        ("nightly-billing-reconciliation-for-every-region", "0,15,30,45 9-17 * jan-jun mon-fri"),
        ("every-ten-seconds-heartbeat-of-the-fleet", "every 10s"),
        ("six-field", "*/20 0,15,30,45 9-17 * * mon-fri"),
    ]
    for name, cadence in wide:
        spec = ScheduleSpec.build(
            name=name,
            cadence=cadence,
            task="reconcile_the_ledgers_of_every_region",
            queue="billing-reconciliation",
            zone="America/Argentina/ComodRivadavia",
        )
        live.app.add_schedule(spec)
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, start="/schedules")
    card = page.locator("section.card").first
    table = card.locator("table.grid")
    expect(table).to_contain_text("every-ten-seconds-heartbeat-of-the-fleet")
    card_box, table_box = card.bounding_box(), table.bounding_box()
    assert card_box is not None and table_box is not None
    assert table_box["x"] + table_box["width"] <= card_box["x"] + card_box["width"], (
        table_box,
        card_box,
    )
    # Nothing of the page scrolls sideways: what does not fit scrolls inside the card.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_watch_a_jobs_progress_then_its_output(page: Page, live: Live) -> None:
    """The Running page lists the job with the progress its heartbeat carried; the job's page
    reloads itself when the progress moves, and shows the output once the job is done."""
    first, second = threading.Event(), threading.Event()
    GATES["browser"] = (first, second)
    try:
        job = live.app.enqueue("copy_files", {"gate": "browser", "files": 2})
        # The Running page shows what was stored when it was loaded (it does not reload itself):
        # a page loaded between the claim and the first heartbeat would say "not reported".
        wait_until(
            lambda: (stored := live.app.get_job(job.id)) is not None and stored.progress == 0.5,
            TIMEOUT_MS / 1000,
            "a heartbeat to store the job's first progress",
        )
        sign_in(page, start="/running")
        row = page.locator("#running-jobs tbody tr").filter(has_text=str(job.id))
        expect(row).to_contain_text("50%")
        expect(row).to_contain_text("1 of 2 files")
        page.goto(f"/jobs/{job.id}")
        expect(page.locator("#job-progress")).to_contain_text("50%")
        first.set()
        expect(page.locator("#job-progress")).to_contain_text("100%")
        expect(page.locator("#job-progress")).to_contain_text("2 of 2 files")
        expect(page.locator("#job-status")).to_have_text("running")
        second.set()
        expect(page.locator("#job-status")).to_have_text("done")
        expect(page.locator("#job-output")).to_contain_text('"copied": 2')
    finally:
        first.set()  # a failed check must not leave the handler waiting out the worker's stop
        second.set()
        GATES.pop("browser", None)
