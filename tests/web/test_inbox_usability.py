"""The inbox as a busy approver uses it: why approval is needed, approvals so far and by whom,
filter and search (never over masked fields), plain-English decisions, styled unknown pages."""

from __future__ import annotations

from pathlib import Path

from signoff.core.run import RunStatus
from tests.helpers import LEAD, approve, reject
from tests.web.support import Site, token
from tests.web.test_inbox import LEAD as LEAD_CLAIMS
from tests.web.test_inbox import sign_in


async def test_the_run_page_says_why_approval_is_needed(site: Site) -> None:
    pending = await site.propose()
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
    assert 'id="why"' in page.text
    assert "billing-lead" in page.text.split('id="why"')[1].split("</div>")[0]


async def test_the_list_shows_approvals_so_far_and_who_gave_them(site: Site) -> None:
    pending = await site.propose(action="invoice.review")  # two leads
    await site.runtime.decide(pending.run_id, "acme", approve())
    async with site.client() as http:
        await sign_in(http, token(sub="lead-2", roles=("billing-lead",)))
        inbox = await http.get("/approvals")
    assert "1 of 2" in inbox.text
    assert LEAD.id in inbox.text.split("1 of 2")[1][:200]


async def test_filter_by_action_and_search_narrow_the_list(site: Site) -> None:
    cancel = await site.propose({"invoice_id": "INV-71", "amount": 4200}, key="a")
    review = await site.propose(
        {"invoice_id": "INV-72", "amount": 4300}, key="b", action="invoice.review"
    )
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        by_action = await http.get("/approvals", params={"action": "invoice.review"})
        by_search = await http.get("/approvals", params={"q": "inv-71"})
        nothing = await http.get("/approvals", params={"q": "no such thing"})
    assert review.run_id in by_action.text and cancel.run_id not in by_action.text
    assert cancel.run_id in by_search.text and review.run_id not in by_search.text
    assert 'id="no-match"' in nothing.text


async def test_search_never_matches_a_masked_field(site: Site) -> None:
    await site.propose({"invoice_id": "INV-73", "amount": 4200, "reason": "Jane Doe called"})
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        probe = await http.get("/approvals", params={"q": "jane"})
        plain = await http.get("/approvals", params={"q": "INV-73"})
    assert 'id="no-match"' in probe.text  # "reason" is sensitive: not searchable
    assert 'id="no-match"' not in plain.text


async def test_a_rejected_run_reads_rejected_not_rejectd(site: Site) -> None:
    pending = await site.propose()
    await site.runtime.decide(pending.run_id, "acme", reject())
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
    run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.DENIED
    assert "rejected via" in page.text and "rejectd" not in page.text


async def test_statuses_are_marked_so_they_never_break_mid_word(site: Site) -> None:
    pending = await site.propose()
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
        css = await http.get("/approvals/static/inbox.css")
    assert 'id="run-status" class="status"' in page.text
    assert (
        ".status { overflow-wrap: normal; word-break: keep-all; white-space: nowrap; }" in css.text
    )


async def test_an_unknown_inbox_path_gets_a_styled_page_with_a_code(site: Site) -> None:
    async with site.client() as http:
        missing = await http.get("/approvals/no/such/page")
    assert missing.status_code == 404
    assert "There is no such page" in missing.text and "[NOT_FOUND]" in missing.text
    assert "inbox.css" in missing.text


def test_amounts_and_dates_read_as_people_write_them() -> None:
    from signoff.core.definition import DisplayFormat, FieldDisplay
    from signoff.surfaces.web.display import shown

    eur = FieldDisplay(format=DisplayFormat.MONEY, currency="EUR")
    cents = FieldDisplay(format=DisplayFormat.MONEY, currency="EUR", minor_units=True)
    assert shown(4200.0, eur) == "4,200.00 EUR"
    assert shown(88000, cents) == "880.00 EUR"
    assert shown(4200.0, None) == "4200"
    assert shown("2026-12-24", FieldDisplay(format=DisplayFormat.DATE)) == "24 Dec 2026"
    assert (
        shown("2026-12-01T10:00:00Z", FieldDisplay(format=DisplayFormat.DATETIME))
        == "1 Dec 2026, 10:00 UTC"
    )
    assert shown("not money", eur) == "not money"  # shown as it is, never hidden
    assert shown(True, eur) == "true"


def test_a_display_field_that_is_not_an_input_property_is_a_manifest_error(tmp_path: Path) -> None:
    from tests.manifest.support import VALID, edited, problems, write

    text = edited(
        "  sensitive: [note]\n",
        "  sensitive: [note]\n  display:\n    amout: {format: money, currency: EUR}\n"
        "    amount: {format: money}\n",
        VALID,
    )
    write(tmp_path, "a.yaml", text)
    found = {p.path for p in problems(tmp_path)}
    assert {"spec.display.amout", "spec.display.amount.format"} <= found


async def test_a_waiting_run_reads_pending_approval_as_its_outcome_does(site: Site) -> None:
    pending = await site.propose()
    assert pending.status == "PENDING_APPROVAL"
    async with site.client() as http:
        await sign_in(http, token(**LEAD_CLAIMS))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
    status = page.text.split('id="run-status"')[1].split("</strong>")[0]
    assert "PENDING_APPROVAL" in status and "WAITING_APPROVAL" not in status
