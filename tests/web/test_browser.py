"""The inbox in headless Chromium: sign in, approve one run, reject another with the keyboard,
then check what the agent sees. Debian's ``chromium`` driven by Playwright (never a downloaded
browser); skipped, saying why, when either is missing."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from signoff import Code, ExecutionStatus
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE as PROPOSE
from tests.surfaces.support import http_client, running
from tests.web.support import Site, site_for_tests, token

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 10_000

pytestmark = pytest.mark.slow
playwright = pytest.importorskip(
    "playwright.async_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
EXECUTABLE = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
if EXECUTABLE is None:
    pytest.skip(
        "no Chromium at /usr/bin/chromium (apt-get install -y chromium)", allow_module_level=True
    )


@pytest.fixture
async def browser_site() -> AsyncIterator[Site]:
    async with site_for_tests() as site:
        yield site


async def test_an_approver_signs_in_approves_one_run_rejects_another_and_the_agent_sees_it(
    browser_site: Site, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    site = browser_site
    approve_me = await site.propose(
        {"invoice_id": "INV-2", "amount": 4200, "reason": "Jane Doe asked by phone"}, key="a"
    )
    reject_me = await site.propose({"invoice_id": "INV-3", "amount": 9800}, key="b")
    lead = token(sub="lead-1", tenant="acme", roles=("billing-lead",))

    async with running(site.app) as url, async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=EXECUTABLE,
            args=CHROMIUM_ARGS,
        )
        try:
            context = await browser.new_context(java_script_enabled=False)
            context.set_default_timeout(TIMEOUT_MS)
            page = await context.new_page()

            # Signing in: the inbox sends an anonymous visitor to the sign-in form.
            await page.goto(f"{url}/approvals")
            await expect(page).to_have_url(f"{url}/approvals/sign-in?next=%2Fapprovals")
            await page.get_by_label("Access token").fill(lead)
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("heading", level=1)).to_have_text(
                "Waiting for your decision"
            )
            rows = page.locator("table.runs tbody tr")
            await expect(rows).to_have_count(2)
            await expect(page.locator("body")).not_to_contain_text("Jane Doe")
            await page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)

            # Approve the first with the mouse.
            await page.locator(f'a[href="/approvals/runs/{approve_me.run_id}"]').click()
            await page.get_by_label("Reason").fill("checked with the customer")
            await page.get_by_role("button", name="Approve").click()
            await expect(page.locator("#decision-result")).to_contain_text(Code.SUCCEEDED)
            await expect(page.locator("#run-status")).to_have_text("SUCCEEDED")

            # Reject the second with the keyboard only: type the reason, Tab to Reject, Enter.
            await page.get_by_role("link", name="Back to the inbox").click()
            await expect(rows).to_have_count(1)
            await page.locator(f'a[href="/approvals/runs/{reject_me.run_id}"]').focus()
            await page.keyboard.press("Enter")
            await page.get_by_label("Reason").focus()
            await page.keyboard.type("amount looks wrong")
            await page.keyboard.press("Tab")  # Approve
            await page.keyboard.press("Tab")  # Reject
            await expect(page.get_by_role("button", name="Reject")).to_be_focused()
            await page.keyboard.press("Enter")
            await expect(page.locator("#decision-result")).to_contain_text(Code.APPROVAL_REJECTED)

            await page.get_by_role("link", name="Back to the inbox").click()
            await expect(page.locator("main")).to_contain_text("Nothing is waiting for you")
            await page.get_by_role("button", name="Sign out").click()
            await expect(page.get_by_role("status")).to_have_text("You are signed out.")
            await page.goto(f"{url}/approvals")
            await expect(page.get_by_label("Access token")).to_be_visible()
        finally:
            await browser.close()

        # What the agent sees: through the runtime, and through MCP over HTTP with its own token.
        approved = await site.runtime.get(approve_me.run_id, "acme")
        assert approved is not None and approved.status is ExecutionStatus.SUCCEEDED
        agent = token(sub="agent-1", tenant="acme", roles=("billing",), scopes=(PROPOSE,))
        async with http_client(url, agent) as client:
            result = await client.call_tool("signoff_get_run", {"run_id": reject_me.run_id})
        assert result.structured_content is not None
        assert result.structured_content["status"] == ExecutionStatus.DENIED
        assert result.structured_content["code"] == Code.APPROVAL_REJECTED
        assert result.structured_content["message"] == "amount looks wrong"
    assert site.recorder.count == 1
    assert site.recorder.calls[0].input["invoice_id"] == "INV-2"
