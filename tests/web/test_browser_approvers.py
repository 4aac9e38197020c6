"""Approvers where they work, in headless Chromium (Debian's ``chromium`` through Playwright):
single sign-on against a real OpenID provider process, and one-time decision links opened the
way a phone would (375 px wide, no JavaScript)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from signoff import Code
from signoff.core.run import RunStatus
from signoff.surfaces.web.links import LINK_EXPIRED, LINK_INVALID, LINK_STALE, LINK_USED
from signoff.surfaces.web.sso import OidcConfig
from tests.helpers import LEAD, approve, status_of
from tests.surfaces.support import free_socket, running
from tests.web.oidc_provider import Provider, oidc_provider
from tests.web.support import Site, site_for_tests, token, web_config
from tests.web.test_browser import CHROMIUM_ARGS, EXECUTABLE, TIMEOUT_MS
from tests.web.test_links import LEAD2_ENTRY, LEAD_ENTRY

pytestmark = pytest.mark.slow
PHONE = {"width": 375, "height": 812}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as started:
        yield started


@asynccontextmanager
async def served(**config: Any) -> AsyncIterator[tuple[Site, str]]:
    """A site whose public URL is the address it is really served on (SSO redirects there)."""
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with (
        site_for_tests(config=web_config(public_url=url, **config)) as site,
        running(site.app, sock),
    ):
        yield site, url


@asynccontextmanager
async def browser_page(**context: Any) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=EXECUTABLE, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(java_script_enabled=False, **context)
            ctx.set_default_timeout(TIMEOUT_MS)
            yield await ctx.new_page()
        finally:
            await browser.close()


async def sso_sign_in(page: Any, url: str, sub: str) -> None:
    await page.goto(f"{url}/approvals")
    await page.get_by_role("link", name="Sign in with single sign-on").click()
    await page.locator('input[name="sub"]').fill(sub)  # the provider's own sign-in page
    await page.get_by_role("button", name="Authorize").click()


async def test_an_approver_signs_in_with_sso_in_a_browser_and_decides(
    provider: Provider, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    oidc = OidcConfig(issuer=provider.issuer, client_id="signoff-inbox", client_secret="s3cret")
    async with served(oidc=oidc) as (site, url), browser_page() as page:
        pending = await site.propose()
        await sso_sign_in(page, url, "fin-lead")
        await expect(page).to_have_url(f"{url}/approvals")
        await expect(page.locator("header")).to_contain_text("fin-lead")
        await page.locator(f'a[href="/approvals/runs/{pending.run_id}"]').click()
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("#run-status")).to_have_text("SUCCEEDED")
        await page.screenshot(path=str(tmp_path / "sso.png"), full_page=True)
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("status")).to_have_text("You are signed out.")
    assert site.recorder.count == 1


async def test_in_a_browser_a_wrong_tenant_sees_nothing_and_a_user_without_an_approver_role_is_refused(
    provider: Provider,
) -> None:
    from playwright.async_api import expect

    oidc = OidcConfig(issuer=provider.issuer, client_id="signoff-inbox", client_secret="s3cret")
    async with served(oidc=oidc) as (site, url):
        pending = await site.propose()
        async with browser_page() as page:
            await sso_sign_in(page, url, "globex-lead")
            await expect(page).to_have_url(f"{url}/approvals")
            await expect(page.locator("main")).not_to_contain_text(pending.run_id)
            await page.goto(f"{url}/approvals/runs/{pending.run_id}")
            await expect(page.locator("main")).to_contain_text(Code.ACTION_RUN_NOT_FOUND)
        async with browser_page() as page:
            await sso_sign_in(page, url, "clerk")
            await expect(page.locator("main")).to_contain_text(Code.APPROVER_NOT_ELIGIBLE)
            await expect(page.locator("header")).not_to_contain_text("Sign out")
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL


async def test_a_decision_link_on_a_phone_valid_reused_expired_tampered_and_stale(
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    async with served() as (site, _url), browser_page(viewport=PHONE) as page:
        assert site.links is not None
        # Valid: the page shows the run and decides only when pressed.
        first = await site.propose()
        run = await site.runtime.get_run(first.run_id, "acme")
        assert run is not None
        link = await site.links.issue(run, LEAD_ENTRY)
        await page.goto(link)
        await expect(page.locator("#why")).to_contain_text("billing-lead")
        await page.screenshot(path=str(tmp_path / "link-phone.png"), full_page=True)
        assert await status_of(site.runtime, first.run_id) is RunStatus.WAITING_APPROVAL
        await page.get_by_label("Reason").fill("ok from my phone")
        await page.get_by_role("button", name="Approve").click()
        await expect(page.locator("#run-status")).to_have_text("SUCCEEDED")

        # Reused.
        await page.goto(link)
        await expect(page.locator("main")).to_contain_text(LINK_USED)

        # Tampered.
        await page.goto(link[:-2] + ("AA" if not link.endswith("AA") else "BB"))
        await expect(page.locator("main")).to_contain_text(LINK_INVALID)

        # Stale: another approver decided after the link was sent.
        second = await site.propose(action="invoice.review", key="k2")
        run = await site.runtime.get_run(second.run_id, "acme")
        assert run is not None
        stale = await site.links.issue(run, LEAD2_ENTRY)
        await site.runtime.decide(second.run_id, "acme", approve(LEAD))
        await page.goto(stale)
        await expect(page.locator("main")).to_contain_text(LINK_STALE)

        # Expired.
        third = await site.propose(key="k3")
        run = await site.runtime.get_run(third.run_id, "acme")
        assert run is not None
        late = await site.links.issue(run, LEAD_ENTRY)
        site.clock.advance(timedelta(minutes=16))
        await page.goto(late)
        await expect(page.locator("main")).to_contain_text(LINK_EXPIRED)
    assert site.recorder.count == 1


async def test_in_a_browser_an_approver_sees_the_preview_amends_the_amount_and_approves(
    tmp_path: Path,
) -> None:
    import os

    from playwright.async_api import expect

    shots = Path(os.environ.get("SIGNOFF_SCREENSHOTS", str(tmp_path)))
    async with served() as (site, url):
        adjust = await site.propose(
            {"invoice_id": "INV-1007", "amount": 5000},
            action="invoice.adjust",
            key="adj",
        )
        await site.propose({"invoice_id": "INV-1002", "amount": 4200.0}, key="c1")
        await site.propose(
            {"invoice_id": "INV-1003", "amount": 8800}, key="c2", action="invoice.review"
        )
        lead = token(sub="lead-1", tenant="acme", roles=("billing-lead",))
        for name, viewport in (("desktop", {"width": 1280, "height": 800}), ("phone", PHONE)):
            async with browser_page(viewport=viewport) as page:
                await page.goto(f"{url}/approvals")
                await page.get_by_label("Access token").fill(lead)
                await page.get_by_role("button", name="Sign in").click()
                await expect(page.locator("table.runs tbody tr")).to_have_count(3)
                await page.screenshot(
                    path=str(shots / f"approvals-inbox-{name}.png"), full_page=True
                )
                await page.locator(f'a[href="/approvals/runs/{adjust.run_id}"]').click()
                await expect(page.locator("#preview")).to_contain_text("would_cancel")
                await page.screenshot(path=str(shots / f"approvals-run-{name}.png"), full_page=True)
        async with browser_page() as page:
            await page.goto(f"{url}/approvals")
            await page.get_by_label("Access token").fill(lead)
            await page.get_by_role("button", name="Sign in").click()
            await page.goto(f"{url}/approvals/runs/{adjust.run_id}")
            await page.get_by_label("amount").fill("4200")
            await page.get_by_role("button", name="Approve").click()
            await expect(page.locator("#run-status")).to_have_text("SUCCEEDED")
            await expect(page.locator("#amendments")).to_contain_text("4200")
    run = await site.runtime.get_run(adjust.run_id, "acme")
    assert run is not None and run.approved_input is not None
    assert run.approved_input["amount"] == 4200 and run.input["amount"] == 5000


async def test_in_a_browser_an_amount_amended_into_a_higher_tier_waits_for_a_second_approver() -> (
    None
):
    from playwright.async_api import expect

    async with served() as (site, url):
        adjust = await site.propose(
            {"invoice_id": "INV-1008", "amount": 5000}, action="invoice.adjust", key="tier"
        )
        lead = token(sub="lead-1", tenant="acme", roles=("billing-lead",))
        async with browser_page() as page:
            await page.goto(f"{url}/approvals/runs/{adjust.run_id}")
            await page.get_by_label("Access token").fill(lead)
            await page.get_by_role("button", name="Sign in").click()
            await page.get_by_label("amount").fill("12000")
            await page.get_by_role("button", name="Approve").click()
            await expect(page.locator("#decision-result")).to_contain_text(Code.APPROVAL_RECORDED)
            await expect(page.locator("main")).to_contain_text("1 of 2")
        assert await status_of(site.runtime, adjust.run_id) is RunStatus.WAITING_APPROVAL
    assert site.recorder.count == 0
