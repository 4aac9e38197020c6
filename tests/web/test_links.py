"""One-time decision links: GET never decides; POST decides once; used, expired, tampered and
stale links say so; the decision goes through ``Runtime.decide``."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import httpx
import pytest

from signoff import Code
from signoff.core.identity import Channel
from signoff.core.run import RunStatus
from signoff.surfaces.web.links import (
    LINK_EXPIRED,
    LINK_INVALID,
    LINK_STALE,
    LINK_USED,
    DecisionLinks,
    DirectoryEntry,
)
from tests.helpers import LEAD, LEAD2, approve
from tests.web.support import BASE_URL, Site, site_for_tests, web_config

LEAD_ENTRY = DirectoryEntry("lead-1", "acme", ("billing-lead",))
LEAD2_ENTRY = DirectoryEntry("lead-2", "acme", ("billing-lead",))
CLERK_ENTRY = DirectoryEntry("clerk-1", "acme", ("billing",))
OTHER_TENANT_ENTRY = DirectoryEntry("lead-9", "globex", ("billing-lead",))
DIRECTORY = {e.approver_id: e for e in (LEAD_ENTRY, LEAD2_ENTRY, CLERK_ENTRY, OTHER_TENANT_ENTRY)}


def links_of(site: Site) -> DecisionLinks:
    assert site.links is not None
    return site.links


def path_of(url: str) -> str:
    assert url.startswith(BASE_URL)
    return url[len(BASE_URL) :]


def code_in(page: httpx.Response) -> str:
    found = re.search(r"\[([A-Z_]+)\]", page.text)
    assert found is not None, page.text
    return found.group(1)


async def decide(
    site: Site, url: str, decision: str = "approve", *, page: httpx.Response | None = None
) -> httpx.Response:
    """Press a button on the link's page (``page``, or the page opened now) as a browser would:
    with the run version the page showed."""
    page = page if page is not None else await site.client().get(path_of(url))
    found = re.search(r'name="version" value="(\d+)"', page.text)
    form = {"decision": decision, "reason": "phone", "version": found.group(1) if found else "1"}
    action = re.search(r'action="(/approvals/links/[^"]+)"', page.text)
    return await site.client().post(action.group(1) if action else path_of(url), data=form)


async def test_opening_a_link_shows_the_run_and_never_decides() -> None:
    async with site_for_tests() as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        first = await site.client().get(path_of(url))
        again = await site.client().get(path_of(url))
        still = await site.runtime.get_run(pending.run_id, "acme")
    assert first.status_code == again.status_code == 200
    assert pending.run_id in first.text and "INV-2" in first.text
    assert "Why approval is needed" in first.text and "billing-lead" in first.text
    assert first.headers["referrer-policy"] == "no-referrer"
    assert first.headers["cache-control"] == "no-store"
    assert still is not None and still.status is RunStatus.WAITING_APPROVAL
    assert still.approval is not None and still.approval.decisions == ()


async def test_a_link_decides_once_through_the_runtime_and_is_then_used() -> None:
    async with site_for_tests() as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        done = await decide(site, url)
        reused = await decide(site, url)
        reopened = await site.client().get(path_of(url))
        stored = await site.runtime.get_run(pending.run_id, "acme")
    assert done.status_code == 200 and "SUCCEEDED" in done.text
    assert stored is not None and stored.status is RunStatus.SUCCEEDED
    assert stored.approval is not None
    (decision,) = stored.approval.decisions
    assert (decision.approver_id, decision.channel, decision.via) == ("lead-1", Channel.UI, "link")
    assert decision.reason == "phone"
    assert site.recorder.count == 1
    assert reused.status_code == 410 and code_in(reused) == LINK_USED
    assert reopened.status_code == 410 and code_in(reopened) == LINK_USED


async def test_an_expired_link_says_so_and_decides_nothing() -> None:
    async with site_for_tests(config=web_config(link_ttl=timedelta(minutes=5))) as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        site.clock.advance(timedelta(minutes=5))
        shown = await site.client().get(path_of(url))
        posted = await decide(site, url)
        stored = await site.runtime.get_run(pending.run_id, "acme")
    assert shown.status_code == posted.status_code == 410
    assert code_in(shown) == code_in(posted) == LINK_EXPIRED
    assert stored is not None and stored.status is RunStatus.WAITING_APPROVAL


@pytest.mark.parametrize(
    "tamper",
    [
        lambda token: token[:-1] + ("A" if token[-1] != "A" else "B"),
        lambda token: token[:-1],
        lambda token: token + "x",
        lambda token: "%2e%2e%2f" + token[9:],
    ],
    ids=["one-character", "shorter", "longer", "path-trick"],
)
async def test_a_tampered_link_is_not_valid(tamper: object) -> None:
    async with site_for_tests() as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        token = url.rsplit("/", 1)[1]
        bad = url.rsplit("/", 1)[0] + "/" + tamper(token)  # type: ignore[operator]
        shown = await site.client().get(path_of(bad))
        posted = await decide(site, bad)
        stored = await site.runtime.get_run(pending.run_id, "acme")
    assert shown.status_code == 404 and posted.status_code in (404, 405)
    assert code_in(shown) in (LINK_INVALID, "NOT_FOUND")  # a path trick lands on no link at all
    assert stored is not None and stored.approval is not None and stored.approval.decisions == ()


async def test_a_link_goes_stale_when_another_decision_moved_the_run_on() -> None:
    async with site_for_tests() as site:
        pending = await site.propose(action="invoice.review")  # two leads
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD2_ENTRY)
        opened = await site.client().get(path_of(url))  # lead-2 reads the page at version 1
        await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
        unopened = await site.client().get(path_of(url))
        stale = await decide(site, url, page=opened)
        moved_on = await site.runtime.get_run(pending.run_id, "acme")
        assert moved_on is not None
        # The press on the old page records nothing and shows the fresh view with a fresh link.
        assert stale.status_code == 409 and Code.APPROVAL_RUN_CHANGED in stale.text
        assert 'id="run-changed"' in stale.text
        assert f'name="version" value="{moved_on.version}"' in stale.text
        assert moved_on.approval is not None and len(moved_on.approval.decisions) == 1
        spent = await site.client().get(path_of(url))
        done = await decide(site, url, page=stale)
        final = await site.runtime.get_run(pending.run_id, "acme")
    assert unopened.status_code == 409 and code_in(unopened) == LINK_STALE
    assert code_in(spent) == LINK_USED
    assert done.status_code == 200
    assert final is not None and final.status is RunStatus.SUCCEEDED
    assert final.approval is not None
    assert [d.approver_id for d in final.approval.decisions] == [LEAD.id, LEAD2.id]


async def test_a_link_for_someone_the_runtime_would_refuse_decides_nothing() -> None:
    async with site_for_tests() as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, CLERK_ENTRY)  # no approver role
        shown = await site.client().get(path_of(url))
        posted = await decide(site, url)
    assert shown.status_code == posted.status_code == 403
    assert code_in(shown) == Code.APPROVER_NOT_ELIGIBLE


async def test_racing_presses_of_one_link_record_one_decision() -> None:
    async with site_for_tests() as site:
        pending = await site.propose(action="invoice.review")
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        answers = await asyncio.gather(*(decide(site, url) for _ in range(8)))
        stored = await site.runtime.get_run(pending.run_id, "acme")
    assert [a.status_code for a in answers].count(200) == 1
    assert stored is not None and stored.approval is not None
    assert [d.approver_id for d in stored.approval.decisions] == [LEAD.id]


async def test_notifications_carry_links_only_for_approvers_who_may_decide() -> None:
    async with site_for_tests(config=web_config(approvers=DIRECTORY)) as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        offered = await links_of(site).links_for(run)
        await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
        decided = await site.runtime.get_run(pending.run_id, "acme")
        assert decided is not None
        after = await links_of(site).links_for(decided)
    assert sorted(link["approver_id"] for link in offered) == ["lead-1", "lead-2"]
    assert all(link["url"].startswith(f"{BASE_URL}/approvals/links/") for link in offered)
    assert after == []


async def test_a_decision_page_without_a_choice_is_refused_plainly() -> None:
    async with site_for_tests() as site:
        pending = await site.propose()
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        url = await links_of(site).issue(run, LEAD_ENTRY)
        bad = await decide(site, url, decision="maybe")
        shown = await site.client().get(path_of(url))
    assert bad.status_code == 400
    assert shown.status_code == 200  # the link was not spent by a malformed press
