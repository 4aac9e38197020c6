"""Decisions bound to what the approver saw, on the pages and in Slack (contract §12): after an
amendment, the second approver's inbox page, link page and Slack message show the amended value,
the amendment record and the approvals still needed, and carry the run version; a decision made
on the view from before is refused (``APPROVAL_RUN_CHANGED``) with the fresh view, never
executed, and deciding again on it counts."""

from __future__ import annotations

import json
from typing import Any

from signoff import Code, Principal
from signoff.core.approvals import DecisionRequest
from signoff.core.run import ApprovalVote, RunStatus
from tests.helpers import stored_run
from tests.web.support import Site, hidden, site_for_tests, token
from tests.web.test_inbox import sign_in
from tests.web.test_links import LEAD2_ENTRY, decide, links_of, path_of
from tests.web.test_slack import LEAD_SLACK, press, send, settled, signed, slack_site

PROPOSED = {"invoice_id": "INV-7", "amount": 12000}  # invoice.adjust: two leads above 10,000
LEAD2: dict[str, Any] = {"sub": "lead-2", "roles": ("billing-lead",)}


async def amend(site: Site, run_id: str, who: str = "lead-1") -> int:
    """``who`` amends the amount to 19,900 and approves (one of two); the version now."""
    run = await stored_run(site.store, run_id)
    result = await site.runtime.decide(
        run_id,
        "acme",
        DecisionRequest(
            approver=Principal(id=who, roles=("billing-lead",)),
            vote=ApprovalVote.APPROVE,
            amendments={"amount": 19900},
            expected_version=run.version,
        ),
    )
    assert result.code == Code.APPROVAL_RECORDED, result
    return (await stored_run(site.store, run_id)).version


def assert_shows_the_amended_run(html: str, version: int) -> None:
    will_run = html.split('id="will-run"', 1)[1].split("</dl>", 1)[0]
    assert "19900" in will_run and "12000" not in will_run
    amendments = html.split('id="amendments"', 1)[1].split("</ul>", 1)[0]
    assert "lead-1" in amendments and "12000" in amendments and "19900" in amendments
    assert "1 more needed" in html
    assert f'name="version" value="{version}"' in html


async def test_the_second_approvers_inbox_page_shows_what_will_run_and_binds_to_it() -> None:
    async with site_for_tests() as site:
        pending = await site.propose(PROPOSED, action="invoice.adjust")
        async with site.client() as http:
            await sign_in(http, token(**LEAD2))
            before = await http.get(f"/approvals/runs/{pending.run_id}")
            now = await amend(site, pending.run_id)
            page = await http.get(f"/approvals/runs/{pending.run_id}")
            assert_shows_the_amended_run(page.text, now)
            # The form from before the amendment (12,000 pre-filled): refused, fresh view shown.
            stale_form = {
                "csrf": hidden(before.text, "csrf"),
                "version": hidden(before.text, "version"),
                "decision": "approve",
                "amend.amount": hidden_amount(before.text),
            }
            stale = await http.post(f"/approvals/runs/{pending.run_id}/decide", data=stale_form)
            assert stale.status_code == 409, stale.text
            assert 'id="run-changed"' in stale.text and Code.APPROVAL_RUN_CHANGED in stale.text
            assert_shows_the_amended_run(stale.text, now)
            waiting = await stored_run(site.store, pending.run_id)
            assert waiting.status is RunStatus.WAITING_APPROVAL and site.recorder.count == 0
            assert waiting.approval is not None and len(waiting.approval.decisions) == 1
            # Deciding again on the fresh view counts; what runs is what it showed.
            fresh_form = {
                "csrf": hidden(stale.text, "csrf"),
                "version": hidden(stale.text, "version"),
                "decision": "approve",
                "amend.amount": hidden_amount(stale.text),
            }
            done = await http.post(f"/approvals/runs/{pending.run_id}/decide", data=fresh_form)
        assert done.status_code == 303, done.text
        final = await stored_run(site.store, pending.run_id)
        assert final.status is RunStatus.SUCCEEDED
        assert site.recorder.calls[-1].input["amount"] == 19900


def hidden_amount(html: str) -> str:
    return html.split('name="amend.amount" value="', 1)[1].split('"', 1)[0]


async def test_the_second_approvers_link_page_shows_what_will_run_and_a_stale_press_is_refused() -> (
    None
):
    async with site_for_tests() as site:
        pending = await site.propose(PROPOSED, action="invoice.adjust")
        run = await stored_run(site.store, pending.run_id)
        url = await links_of(site).issue(run, LEAD2_ENTRY)
        opened = await site.client().get(path_of(url))  # lead-2 reads it at the proposal
        now = await amend(site, pending.run_id)
        # The link that comes with the decided notification shows the amended run.
        moved_on = await stored_run(site.store, pending.run_id)
        fresh_url = await links_of(site).issue(moved_on, LEAD2_ENTRY)
        page = await site.client().get(path_of(fresh_url))
        assert page.status_code == 200
        assert_shows_the_amended_run(page.text, now)
        # Pressing Approve on the page read before the amendment decides nothing.
        stale = await decide(site, url, page=opened)
        assert stale.status_code == 409 and 'id="run-changed"' in stale.text
        assert_shows_the_amended_run(stale.text, now)
        assert (await stored_run(site.store, pending.run_id)).status is RunStatus.WAITING_APPROVAL
        assert site.recorder.count == 0
        done = await decide(site, url, page=stale)  # on the fresh view: counts
    assert done.status_code == 200, done.text
    assert (await stored_run(site.store, pending.run_id)).status is RunStatus.SUCCEEDED
    assert site.recorder.calls[-1].input["amount"] == 19900


def _buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [
        element["value"]
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if "value" in element
    ]


async def test_slack_shows_the_amendment_and_a_press_on_the_old_message_is_refused() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose(PROPOSED, action="invoice.adjust")
        (posted,) = await fake.wait_for("chat.postMessage")
        assert set(_buttons(posted["blocks"])) == {f"{pending.run_id}@1"}
        now = await amend(site, pending.run_id, who="lead-2")
        (update,) = await fake.wait_for("chat.update")
        text = json.dumps(update["blocks"])
        assert "19900" in text and "Amendments" in text and "amount 12000" in text
        assert "1 more needed" in text and f"version {now}" in text
        assert set(_buttons(update["blocks"])) == {f"{pending.run_id}@{now}"}
        # lead-1 presses Approve on the message as first posted (version 1).
        body = press(pending.run_id)
        assert (await send(site, body, signed(body))).status_code == 200
        (told,) = await fake.wait_for("chat.postEphemeral")
        assert told["user"] == LEAD_SLACK and "changed" in told["text"]
        refreshed = (await fake.wait_for("chat.update", 2))[-1]
        assert set(_buttons(refreshed["blocks"])) == {f"{pending.run_id}@{now}"}
        waiting = await stored_run(site.store, pending.run_id)
        assert waiting.status is RunStatus.WAITING_APPROVAL and site.recorder.count == 0
        # The press on the refreshed message counts.
        body = press(pending.run_id, version=now)
        assert (await send(site, body, signed(body))).status_code == 200
        await settled(site, pending.run_id, RunStatus.SUCCEEDED)
    assert site.recorder.calls[-1].input["amount"] == 19900
