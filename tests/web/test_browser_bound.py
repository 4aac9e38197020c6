"""In headless Chromium: an approver reads a run, another amends it meanwhile, the press on the
old page is refused with the fresh view, and approving that view runs what it showed."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.core.run import RunStatus
from tests.helpers import stored_run
from tests.surfaces.support import running
from tests.web.support import site_for_tests, token
from tests.web.test_bound_pages import PROPOSED, amend
from tests.web.test_browser import CHROMIUM_ARGS, EXECUTABLE, TIMEOUT_MS

pytestmark = pytest.mark.slow


async def test_a_press_on_a_page_read_before_an_amendment_shows_the_fresh_view(
    tmp_path: Path,
) -> None:
    from playwright.async_api import async_playwright, expect

    async with site_for_tests() as site:
        pending = await site.propose(PROPOSED, action="invoice.adjust")
        lead2 = token(sub="lead-2", tenant="acme", roles=("billing-lead",))
        async with running(site.app) as url, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=EXECUTABLE, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context(java_script_enabled=False)
                context.set_default_timeout(TIMEOUT_MS)
                page = await context.new_page()
                await page.goto(f"{url}/approvals/runs/{pending.run_id}")
                await page.get_by_label("Access token").fill(lead2)
                await page.get_by_role("button", name="Sign in").click()
                await expect(page.locator("#will-run")).to_contain_text("12000")
                await amend(site, pending.run_id)  # lead-1, while lead-2 is reading
                await page.get_by_role("button", name="Approve").click()
                await expect(page.locator("#run-changed")).to_contain_text("APPROVAL_RUN_CHANGED")
                await expect(page.locator("#will-run")).to_contain_text("19900")
                await expect(page.locator("#amendments")).to_contain_text("lead-1")
                await expect(page.locator("#approvals")).to_contain_text("1 more needed")
                await page.screenshot(path=str(tmp_path / "run-changed.png"), full_page=True)
                waiting = await stored_run(site.store, pending.run_id)
                assert waiting.status is RunStatus.WAITING_APPROVAL
                await page.get_by_role("button", name="Approve").click()
                await expect(page.locator("#decision-result")).to_contain_text("SUCCEEDED")
            finally:
                await browser.close()
        assert site.recorder.calls[-1].input["amount"] == 19900
