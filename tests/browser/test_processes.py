"""The Processes page in a real browser (Debian's Chromium), over a live server and the real
worker of the fixture: reached from the nav, it lists the worker as its beacon recorded it,
warns of a schedule no scheduler fires, and the CSP refuses nothing on it."""

from __future__ import annotations

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from chronoq.storage.base import ProcessListParams
from tests.browser.conftest import READER, TIMEOUT_MS, Live
from tests.browser.tasks import QUEUES
from tests.browser.test_dashboard import sign_in
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

expect.set_options(timeout=TIMEOUT_MS)


def test_the_live_worker_is_on_the_processes_page(page: Page, live: Live) -> None:
    complaints: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            complaints.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: complaints.append(str(error)))
    wait_until(
        lambda: live.app.store.process_list(ProcessListParams()).processes,
        what="the worker's record",
    )
    sign_in(page, READER)
    page.get_by_role("link", name="Processes").click()
    expect(page).to_have_url(f"{live.url}/processes")
    row = page.locator("table.processes tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td").first).to_have_text("worker")
    for queue in QUEUES:
        expect(row.get_by_role("link", name=queue)).to_be_visible()
    row.get_by_text("task(s)").click()  # the tasks it knows unfold
    expect(row.locator("details")).to_contain_text("send_email")
    expect(page.locator("#no-scheduler")).to_have_count(0)

    spec = live.app.schedule_spec(
        name="nightly", cadence="0 3 * * *", task="send_email", payload={"to": "a@example.com"}
    )
    live.app.add_schedule(spec)
    page.get_by_role("link", name="Schedules").click()
    expect(page.locator("#no-scheduler")).to_contain_text("No scheduler is running")
    expect(page.locator("#no-scheduler code")).to_have_text("chronoq scheduler --app MODULE:APP")
    assert not complaints, complaints
