"""Decisions bound to what the approver saw (contract §12), on the JSON API: every view shows the
input that will run, the amendment record and the approvals still needed; every decision names
the version it was shown; a stale one is refused with the fresh view and nothing is lost."""

from __future__ import annotations

from typing import Any

from signoff import Code
from signoff.core.run import RunStatus
from signoff.surfaces.web.api import APPROVAL_VERSION_REQUIRED
from tests.helpers import stored_run
from tests.web.support import Site, api_decide, bearer

LEAD1: dict[str, Any] = {"sub": "lead-1", "roles": ("billing-lead",)}
LEAD2: dict[str, Any] = {"sub": "lead-2", "roles": ("billing-lead",)}
# invoice.adjust: amount amendable; above 10,000 two leads must approve (an escalation tier).
PROPOSED = {"invoice_id": "INV-7", "amount": 12000}


async def amended_by_the_first_lead(site: Site) -> tuple[str, int]:
    """A two-lead run of 12,000 the first lead amended to 19,900 and approved; the run id and
    the version the second lead would have been shown before the amendment."""
    pending = await site.propose(PROPOSED, action="invoice.adjust")
    assert pending.code == Code.APPROVAL_REQUIRED
    before = (await stored_run(site.store, pending.run_id)).version
    async with site.client(bearer(**LEAD1)) as first:
        recorded = await api_decide(
            site, first, pending.run_id, json={"amend": {"amount": 19900}}, version=before
        )
    assert recorded.json()["code"] == Code.APPROVAL_RECORDED, recorded.json()
    return pending.run_id, before


async def test_the_second_approver_reads_the_amended_value_the_record_and_one_more_needed(
    site: Site,
) -> None:
    run_id, before = await amended_by_the_first_lead(site)
    async with site.client(bearer(**LEAD2)) as second:
        view = (await second.get(f"/api/runs/{run_id}")).json()
        listed = (await second.get("/api/approvals")).json()["approvals"]
    assert view["input"]["amount"] == 19900
    assert view["proposed_input"]["amount"] == 12000
    assert view["amended"] is True
    (record,) = view["amendments"]
    assert record["approver_id"] == "lead-1" and record["fields"] == ["amount"]
    assert (record["previous"], record["changes"]) == ({"amount": 12000}, {"amount": 19900})
    approval = view["approval"]
    assert (approval["approvals_needed"], approval["approvals_received"]) == (2, 1)
    assert approval["approvals_still_needed"] == 1 and approval["approvers"] == ["lead-1"]
    assert view["version"] > before and view["may_decide"] is True
    assert [item["input"]["amount"] for item in listed] == [19900]


async def test_a_decision_on_the_view_from_before_the_amendment_is_refused_with_the_fresh_view(
    site: Site,
) -> None:
    run_id, before = await amended_by_the_first_lead(site)
    async with site.client(bearer(**LEAD2)) as second:
        stale = await api_decide(site, second, run_id, version=before)
        body = stale.json()
        assert (stale.status_code, body["code"], body["accepted"]) == (
            409,
            Code.APPROVAL_RUN_CHANGED,
            False,
        )
        current = (await stored_run(site.store, run_id)).version
        assert body["current_version"] == current
        assert body["run"]["input"]["amount"] == 19900 and body["run"]["version"] == current
        # Nothing ran and nothing was recorded; the run still waits for this approver.
        run = await stored_run(site.store, run_id)
        assert run.status is RunStatus.WAITING_APPROVAL and site.recorder.count == 0
        assert run.approval is not None and len(run.approval.decisions) == 1
        # Deciding again on the fresh view counts, and what runs is what it showed.
        again = await api_decide(site, second, run_id, version=body["current_version"])
    assert again.json()["code"] == Code.SUCCEEDED, again.json()
    assert site.recorder.calls[-1].input["amount"] == 19900


async def test_a_stale_rejection_is_refused_too_and_the_run_keeps_waiting(site: Site) -> None:
    run_id, before = await amended_by_the_first_lead(site)
    async with site.client(bearer(**LEAD2)) as second:
        stale = await api_decide(site, second, run_id, "reject", version=before)
    assert (stale.status_code, stale.json()["code"]) == (409, Code.APPROVAL_RUN_CHANGED)
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_APPROVAL


async def test_a_decision_without_a_version_is_refused_with_its_own_code(site: Site) -> None:
    pending = await site.propose()
    async with site.client(bearer(**LEAD1)) as http:
        bare = await http.post(f"/api/runs/{pending.run_id}/approve", json={"reason": "ok"})
        empty = await http.post(f"/api/runs/{pending.run_id}/reject")
    for answer in (bare, empty):
        assert (answer.status_code, answer.json()["code"]) == (400, APPROVAL_VERSION_REQUIRED)
    run = await stored_run(site.store, pending.run_id)
    assert run.status is RunStatus.WAITING_APPROVAL and run.approval is not None
    assert run.approval.decisions == () and site.recorder.count == 0
