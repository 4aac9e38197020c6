"""Floods never hide older requests: the inbox and the API list oldest first with paging, and the
expiry sweeper reaches every overdue run of every tenant however many newer ones wait."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any

from signoff import Code, Principal, RetryDisposition, RunStatus
from signoff.core.runtime import DEFAULT_PENDING_PER_PRINCIPAL
from tests.web.support import Site, api_decide, bearer, hidden, token

FLOOD = 1500
# Each principal's share of pending approvals is 100 (the default): the flood takes fifteen.
FLOODERS = [Principal(id=f"agent-flood-{i}", roles=("billing",)) for i in range(15)]
LEAD: dict[str, Any] = {"sub": "lead-1", "roles": ("billing-lead",)}
# Bounded in time: a generous ceiling on the machine's worst day, not a speed target.
CEILING_SECONDS = 240.0


async def flood(site: Site, count: int = FLOOD) -> None:
    for index in range(count):
        await site.propose(
            {"invoice_id": f"INV-{9000 + index}", "amount": 2000},
            key=f"junk-{index}",
            principal=FLOODERS[index % len(FLOODERS)],
        )


async def test_an_older_request_stays_first_in_the_inbox_and_the_api_under_a_flood(
    site: Site,
) -> None:
    started = time.monotonic()
    real = await site.propose(key="the-real-one")
    await flood(site)
    async with site.client(bearer(**LEAD)) as http:
        first = (await http.get("/api/approvals", params={"limit": "500"})).json()
        seen = [run["run_id"] for run in first["approvals"]]
        cursor = first["next_after"]
        while cursor is not None:
            page = (
                await http.get("/api/approvals", params={"limit": "500", "after": cursor})
            ).json()
            seen += [run["run_id"] for run in page["approvals"]]
            cursor = page["next_after"]
    assert seen[0] == real.run_id
    assert len(seen) == len(set(seen)) == FLOOD + 1

    async with site.client() as browser:
        form = await browser.get("/approvals/sign-in")
        await browser.post(
            "/approvals/sign-in",
            data={"csrf": hidden(form.text, "csrf"), "token": token(**LEAD), "next": "/approvals"},
        )
        inbox = await browser.get("/approvals")
    assert inbox.status_code == 200
    rows = re.findall(r'href="/approvals/runs/([^"]+)" class="run-link"', inbox.text)
    assert rows[0] == real.run_id
    assert 'rel="next"' in inbox.text
    assert time.monotonic() - started < CEILING_SECONDS


async def test_the_sweeper_expires_another_tenants_overdue_run_behind_a_flood(site: Site) -> None:
    started = time.monotonic()
    overdue = await site.propose(key="globex-1", tenant="globex")
    site.clock.advance(timedelta(hours=20))
    await flood(site)
    # The globex run is now past its 24 h; the flood (newer, other tenant) is not.
    site.clock.advance(timedelta(hours=5))
    moved = await site.runtime.expire_overdue(limit=200)
    assert moved == 1
    run = await site.runtime.get_run(overdue.run_id, "globex")
    assert run is not None and run.status is RunStatus.EXPIRED
    assert time.monotonic() - started < CEILING_SECONDS


async def test_one_principal_is_capped_at_its_share_of_pending_approvals(site: Site) -> None:
    flooder = FLOODERS[0]
    for index in range(DEFAULT_PENDING_PER_PRINCIPAL):
        answer = await site.propose(
            {"invoice_id": f"INV-{index}", "amount": 2000}, key=f"k-{index}", principal=flooder
        )
        assert answer.code == Code.APPROVAL_REQUIRED
    refused = await site.propose(
        {"invoice_id": "INV-1", "amount": 2000}, key="one-more", principal=flooder
    )
    assert (refused.code, refused.retry) == (
        Code.PENDING_APPROVALS_LIMIT,
        RetryDisposition.AFTER_BACKOFF,
    )
    # Everyone else still asks; and a decided request frees a place for the flooder.
    other = await site.propose(key="someone-else")
    assert other.code == Code.APPROVAL_REQUIRED
    first = await site.runtime.list_runs("acme", oldest_first=True, limit=1)
    async with site.client(bearer(**LEAD)) as http:
        rejected = await api_decide(site, http, first[0].run_id, "reject", {"reason": "junk"})
    assert rejected.status_code == 200
    again = await site.propose(
        {"invoice_id": "INV-1", "amount": 2000}, key="again", principal=flooder
    )
    assert again.code == Code.APPROVAL_REQUIRED
