"""Amend before approve and previews on the approvers' surfaces: the inbox form, the JSON API."""

from __future__ import annotations

from signoff import Code
from signoff.core.run import RunStatus
from tests.web.support import Site, api_decide, bearer, hidden, token
from tests.web.test_inbox import LEAD as LEAD_CLAIMS
from tests.web.test_inbox import sign_in

ADJUST = {"invoice_id": "INV-5", "amount": 5000}


async def test_the_run_page_shows_the_preview_and_the_amendable_fields(site: Site) -> None:
    pending = await site.propose(ADJUST, action="invoice.adjust")
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
    assert 'id="preview"' in page.text and "would_cancel" in page.text
    assert 'name="amend.amount" value="5000"' in page.text
    assert 'name="amend.invoice_id"' not in page.text


async def test_an_approver_amends_the_amount_in_the_inbox_and_the_approved_amount_runs(
    site: Site,
) -> None:
    pending = await site.propose(ADJUST, action="invoice.adjust")
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
        done = await http.post(
            f"/approvals/runs/{pending.run_id}/decide",
            data={
                "csrf": hidden(page.text, "csrf"),
                "version": hidden(page.text, "version"),
                "decision": "approve",
                "reason": "only the disputed part",
                "amend.amount": "4200.50",
            },
        )
        after = await http.get(done.headers["location"])
    run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert run.input["amount"] == 5000 and run.approved_input is not None
    assert run.approved_input["amount"] == 4200.5
    assert site.recorder.calls[-1].input["amount"] == 4200.5
    assert 'id="amendments"' in after.text and "4200.5" in after.text


async def test_the_api_amends_and_refuses_a_field_that_is_not_listed(site: Site) -> None:
    pending = await site.propose(ADJUST, action="invoice.adjust")
    async with site.client(bearer()) as http:
        refused = await api_decide(
            site, http, pending.run_id, "approve", {"amend": {"invoice_id": "INV-9"}}
        )
        shown = await http.get(f"/api/runs/{pending.run_id}")
        done = await api_decide(
            site, http, pending.run_id, "approve", {"reason": "ok", "amend": {"amount": 10}}
        )
    assert refused.status_code == 422 and refused.json()["code"] == Code.AMENDMENT_NOT_ALLOWED
    assert shown.json()["preview"]["output"]["would_cancel"] == "INV-5"
    assert shown.json()["amendable"] == ["amount"]
    body = done.json()
    assert body["code"] == Code.SUCCEEDED
    assert body["outcome"]["amended"] is True
    assert body["outcome"]["approved_input"] == {"invoice_id": "INV-5", "amount": 10}
