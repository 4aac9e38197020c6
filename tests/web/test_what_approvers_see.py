"""What approvers see is what runs: hidden characters shown and flagged, and a decision banner
only from the stored decision."""

from __future__ import annotations

from typing import Any

from signoff import Code
from signoff.core.definition import ApprovalSpec, PolicySpec
from tests.helpers import Recorder, definition, stored_run
from tests.web.support import Site, bearer, hidden, site_for_tests, token
from tests.web.test_inbox import LEAD, sign_in

# An IBAN whose digits a right-to-left override displays reversed.
SPOOFED = "DE89 3704 \u202e0044 0532\u202c 0130 00"
PAYEE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"invoice_id": {"type": "string"}, "iban": {"type": "string"}},
    "required": ["invoice_id", "iban"],
    "additionalProperties": False,
}


PAYEE = definition(
    Recorder(),
    id="payee.change",
    input_schema=PAYEE_SCHEMA,
    approval=ApprovalSpec(when="true", approver_roles=("billing-lead",)),
    policy=PolicySpec(roles=("billing",)),
)


async def test_bidi_and_control_characters_are_shown_visibly_and_flagged_to_approvers() -> None:
    async with site_for_tests(extra=[PAYEE]) as site:
        await _bidi_shown_and_flagged(site)


async def _bidi_shown_and_flagged(site: Site) -> None:
    spoof = await site.propose({"invoice_id": "INV-8", "iban": SPOOFED}, action="payee.change")
    plain = await site.propose(
        {"invoice_id": "INV-9", "iban": "DE89 3704"}, action="payee.change", key="k2"
    )
    assert spoof.code == plain.code == Code.APPROVAL_REQUIRED
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        page = await http.get(f"/approvals/runs/{spoof.run_id}")
        clean = await http.get(f"/approvals/runs/{plain.run_id}")
    async with site.client(bearer()) as api:
        view = (await api.get(f"/api/runs/{spoof.run_id}")).json()
    assert "\u202e" not in page.text and "\u202c" not in page.text
    assert "⟨U+202E⟩0044 0532⟨U+202C⟩" in page.text
    assert "Hidden characters" in page.text
    assert "Hidden characters" not in clean.text
    assert view["hidden_characters"] == ["iban"]
    # The executor still receives exactly what was proposed.
    run = await stored_run(site.store, spoof.run_id)
    assert run.input["iban"] == SPOOFED


async def test_the_decision_banner_comes_from_the_stored_decision_not_the_url(
    site: Site,
) -> None:
    pending = await site.propose()
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        forged = await http.get(f"/approvals/runs/{pending.run_id}?done=SUCCEEDED&ok=1")
        claimed = await http.get(f"/approvals/runs/{pending.run_id}?decided=1")
    for page in (forged, claimed):
        assert page.status_code == 200
        assert 'id="decision-result"' not in page.text
        assert "Decision recorded" not in page.text


async def test_another_approvers_reason_is_shown_with_its_hidden_characters_visible() -> None:
    two_leads = ("lead-2", ("billing-lead",))
    async with site_for_tests() as site:
        pending = await site.propose(action="invoice.review")
        async with site.client() as first:
            await sign_in(first, token(sub=two_leads[0], roles=two_leads[1]))
            page = await first.get(f"/approvals/runs/{pending.run_id}")
            decided = await first.post(
                f"/approvals/runs/{pending.run_id}/decide",
                data={
                    "csrf": hidden(page.text, "csrf"),
                    "version": hidden(page.text, "version"),
                    "decision": "approve",
                    "reason": "checked \u202eIBAN 1234\u202c",
                },
            )
            assert decided.status_code == 303
        async with site.client() as second:
            await sign_in(second, token(**LEAD))
            shown = await second.get(f"/approvals/runs/{pending.run_id}")
    assert "\u202e" not in shown.text
    assert "checked ⟨U+202E⟩IBAN 1234⟨U+202C⟩" in shown.text


async def test_a_refused_decision_page_still_masks_sensitive_values(site: Site) -> None:
    pending = await site.propose({"invoice_id": "INV-74", "amount": 4200, "reason": "Jane Doe"})
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
        form = {
            "csrf": hidden(page.text, "csrf"),
            "version": hidden(page.text, "version"),
            "decision": "approve",
            "reason": "ok",
        }
        first = await http.post(f"/approvals/runs/{pending.run_id}/decide", data=form)
        again = await http.post(f"/approvals/runs/{pending.run_id}/decide", data=form)
    assert first.status_code == 303
    assert again.status_code >= 400 and 'id="decision-result"' in again.text
    assert "Jane Doe" not in page.text and "Jane Doe" not in again.text
