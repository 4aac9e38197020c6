"""The approvers' JSON API: every approval rule answered with its stable code, tenants kept apart."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from signoff import Code, ExecutionStatus, Principal, RunStatus
from signoff.core.identity import Channel
from tests.helpers import stored_run
from tests.web.support import Site, api_decide, bearer, hidden, token

LEAD: dict[str, Any] = {"sub": "lead-1", "roles": ("billing-lead",)}
LEAD2: dict[str, Any] = {"sub": "lead-2", "roles": ("billing-lead",)}


async def test_an_eligible_approver_approves_and_the_run_executes(site: Site) -> None:
    pending = await site.propose()
    async with site.client(bearer(**LEAD)) as http:
        response = await api_decide(site, http, pending.run_id, "approve", {"reason": "ok"})
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["accepted"]) == (Code.SUCCEEDED, True)
    assert body["outcome"]["status"] == ExecutionStatus.SUCCEEDED
    assert site.recorder.count == 1
    run = await stored_run(site.store, pending.run_id)
    assert run is not None and run.approval is not None
    (decision,) = run.approval.decisions
    assert (decision.approver_id, decision.channel, decision.reason) == (
        "lead-1",
        Channel.API,
        "ok",
    )


async def test_an_approver_without_a_listed_role_hears_the_run_does_not_exist(
    site: Site,
) -> None:
    pending = await site.propose()
    async with site.client(bearer(sub="clerk", roles=("billing",))) as http:
        approve = await api_decide(site, http, pending.run_id, "approve")
        reject = await api_decide(site, http, pending.run_id, "reject", {"reason": "no"})
        missing = await api_decide(site, http, "0190aaaa-0000-7000-8000-000000000000")
    # Outside its domain a decision discloses nothing: exactly the missing run's answer.
    for response in (approve, reject):
        assert (response.status_code, response.json()) == (404, missing.json())
        assert response.json()["code"] == Code.ACTION_RUN_NOT_FOUND
    assert (await stored_run(site.store, pending.run_id)).status is RunStatus.WAITING_APPROVAL


async def test_the_proposer_never_approves_their_own_run(site: Site) -> None:
    proposer = Principal(id="lead-1", roles=("billing", "billing-lead"))
    pending = await site.propose(principal=proposer)
    async with site.client(bearer(sub="lead-1", roles=("billing", "billing-lead"))) as http:
        response = await api_decide(site, http, pending.run_id, "approve")
    assert (response.status_code, response.json()["code"]) == (403, Code.APPROVER_NOT_ELIGIBLE)
    assert site.recorder.count == 0


async def test_count_two_needs_two_distinct_approvers(site: Site) -> None:
    pending = await site.propose(action="invoice.review")
    async with site.client(bearer(**LEAD)) as first, site.client(bearer(**LEAD2)) as second:
        one = await api_decide(site, first, pending.run_id, "approve")
        assert site.recorder.count == 0
        two = await api_decide(site, second, pending.run_id, "approve")
    assert (one.status_code, one.json()["code"]) == (200, Code.APPROVAL_RECORDED)
    assert one.json()["outcome"]["approval"]["approvals_received"] == 1
    assert (two.status_code, two.json()["code"]) == (200, Code.SUCCEEDED)
    assert site.recorder.count == 1


async def test_a_repeated_decision_by_the_same_approver_counts_once(site: Site) -> None:
    pending = await site.propose(action="invoice.review")
    async with site.client(bearer(**LEAD)) as http:
        await api_decide(site, http, pending.run_id, "approve")
        again = await api_decide(site, http, pending.run_id, "approve")
        changed_mind = await api_decide(site, http, pending.run_id, "reject")
    assert (again.status_code, again.json()["code"]) == (409, Code.APPROVAL_ALREADY_DECIDED)
    assert changed_mind.json()["code"] == Code.APPROVAL_ALREADY_DECIDED
    run = await stored_run(site.store, pending.run_id)
    assert run is not None and run.approval is not None and len(run.approval.decisions) == 1
    assert run.status is RunStatus.WAITING_APPROVAL


async def test_one_rejection_ends_the_run_even_after_an_approval(site: Site) -> None:
    pending = await site.propose(action="invoice.review")
    async with site.client(bearer(**LEAD)) as first, site.client(bearer(**LEAD2)) as second:
        await api_decide(site, first, pending.run_id, "approve")
        rejected = await api_decide(
            site, second, pending.run_id, "reject", {"reason": "wrong customer"}
        )
        third = await api_decide(site, second, pending.run_id, "approve")
    assert (rejected.status_code, rejected.json()["code"]) == (200, Code.APPROVAL_REJECTED)
    assert rejected.json()["outcome"]["message"] == "wrong customer"
    assert (third.status_code, third.json()["code"]) == (409, Code.APPROVAL_NOT_PENDING)
    outcome = await site.runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.code == Code.APPROVAL_REJECTED
    assert site.recorder.count == 0


async def test_deciding_a_rejected_run_is_not_pending(site: Site) -> None:
    pending = await site.propose()
    async with site.client(bearer(**LEAD)) as lead, site.client(bearer(**LEAD2)) as other:
        await api_decide(site, lead, pending.run_id, "reject")
        late = await api_decide(site, other, pending.run_id, "approve")
    assert (late.status_code, late.json()["code"]) == (409, Code.APPROVAL_NOT_PENDING)


async def test_deciding_an_expired_run_answers_approval_expired(site: Site) -> None:
    pending = await site.propose()
    site.clock.advance(timedelta(hours=25))
    async with site.client(bearer(**LEAD)) as http:
        response = await api_decide(site, http, pending.run_id, "approve")
        again = await api_decide(site, http, pending.run_id, "approve")
    assert (response.status_code, response.json()["code"]) == (409, Code.APPROVAL_EXPIRED)
    assert (again.status_code, again.json()["code"]) == (409, Code.APPROVAL_EXPIRED)
    assert site.recorder.count == 0


async def test_deciding_a_cancelled_run_is_not_pending(site: Site) -> None:
    pending = await site.propose()
    await site.runtime.cancel(pending.run_id, "acme", Principal(id="agent-1", roles=("billing",)))
    async with site.client(bearer(**LEAD)) as http:
        response = await api_decide(site, http, pending.run_id, "approve")
    assert (response.status_code, response.json()["code"]) == (409, Code.APPROVAL_NOT_PENDING)


async def test_a_run_of_another_tenant_answers_exactly_like_a_missing_run(site: Site) -> None:
    theirs = await site.propose(tenant="globex")
    async with site.client(bearer(**LEAD)) as http:
        for path in ("", "/approve", "/reject"):
            if path:
                body = {"expected_version": 1}
                foreign = await http.post(f"/api/runs/{theirs.run_id}{path}", json=body)
                missing = await http.post(f"/api/runs/0000-no-such-run{path}", json=body)
            else:
                foreign = await http.get(f"/api/runs/{theirs.run_id}")
                missing = await http.get("/api/runs/0000-no-such-run")
            assert foreign.status_code == missing.status_code == 404
            assert foreign.json() == missing.json()
            assert foreign.json()["code"] == Code.ACTION_RUN_NOT_FOUND
        listed = await http.get("/api/approvals")
    assert listed.json() == {"approvals": [], "next_after": None}
    run = await stored_run(site.store, theirs.run_id)
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.decisions == ()


async def test_the_list_shows_pending_runs_of_the_tenant_the_caller_could_decide(
    site: Site,
) -> None:
    mine = await site.propose(key="a")
    await site.propose({"invoice_id": "INV-9", "amount": 5}, key="small")  # ran at once
    await site.propose(key="b", tenant="globex")
    own = await site.propose(key="c", principal=Principal(id="lead-1", roles=("billing-lead",)))
    async with (
        site.client(bearer(**LEAD)) as lead,
        site.client(bearer(sub="clerk", roles=("billing",))) as clerk,
    ):
        listed = (await lead.get("/api/approvals")).json()["approvals"]
        nothing = (await clerk.get("/api/approvals")).json()["approvals"]
    assert [item["run_id"] for item in listed] == [mine.run_id]
    assert own.run_id not in {item["run_id"] for item in listed}
    assert nothing == []
    (item,) = listed
    assert item["may_decide"] is True
    assert item["principal"] == {"id": "agent-1", "roles": ["billing"]}
    assert (item["proposer_type"], item["risk"], item["resource"]) == (
        "agent",
        "high",
        "invoice/INV-2",
    )
    assert item["approval"]["approver_roles"] == ["billing-lead"]


async def test_fields_the_manifest_marks_sensitive_are_masked(site: Site) -> None:
    pending = await site.propose(
        {"invoice_id": "INV-3", "amount": 4000, "reason": "Jane Doe, IBAN"}
    )
    async with site.client(bearer(**LEAD)) as http:
        shown = (await http.get(f"/api/runs/{pending.run_id}")).json()
    assert shown["input"]["invoice_id"] == "INV-3"
    assert shown["input"]["reason"] != "Jane Doe, IBAN"
    assert "Jane" not in str(shown)


async def test_an_overdue_run_leaves_the_list(site: Site) -> None:
    await site.propose()
    site.clock.advance(timedelta(hours=25))
    async with site.client(bearer(**LEAD)) as http:
        listed = (await http.get("/api/approvals")).json()["approvals"]
    assert listed == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic bGVhZDpsZWFk"},
    ],
    ids=["missing", "garbage", "basic"],
)
async def test_without_a_valid_bearer_token_nothing_is_read_or_decided(
    site: Site, headers: dict[str, str]
) -> None:
    pending = await site.propose()
    async with site.client(headers) as http:
        responses = [
            await http.get("/api/approvals"),
            await http.get(f"/api/runs/{pending.run_id}"),
            await api_decide(site, http, pending.run_id, "approve"),
        ]
    for response in responses:
        assert response.status_code == 401
        assert response.json()["code"] == Code.UNAUTHENTICATED
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert (await stored_run(site.store, pending.run_id)).status is RunStatus.WAITING_APPROVAL


async def test_the_session_cookie_never_authenticates_the_json_api(site: Site) -> None:
    pending = await site.propose()
    async with site.client() as browser:
        form = await browser.get("/approvals/sign-in")
        csrf = hidden(form.text, "csrf")
        await browser.post(
            "/approvals/sign-in", data={"csrf": csrf, "token": token(**LEAD), "next": "/approvals"}
        )
        session = browser.cookies["signoff_session"]
        response = await browser.post(
            f"/api/runs/{pending.run_id}/approve",
            headers={"Cookie": f"signoff_session={session}"},
        )
    assert (response.status_code, response.json()["code"]) == (401, Code.UNAUTHENTICATED)
    assert site.recorder.count == 0


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"reason": 5}', b'{"reason": "ok", "approver": "boss"}', b'["x"]'],
    ids=["garbage", "wrong-type", "extra-field", "not-an-object"],
)
async def test_a_malformed_decision_body_is_refused_before_deciding(
    site: Site, body: bytes
) -> None:
    pending = await site.propose()
    async with site.client(bearer(**LEAD)) as http:
        response = await http.post(
            f"/api/runs/{pending.run_id}/approve",
            content=body,
            headers={"Content-Type": "application/json"},
        )
    assert (response.status_code, response.json()["code"]) == (400, Code.INPUT_VALIDATION_FAILED)
    assert site.recorder.count == 0


async def test_the_api_shows_the_short_approval_digest_on_the_request_and_each_decision(
    site: Site,
) -> None:
    pending = await site.propose(action="invoice.review")
    assert pending.approval is not None and pending.approval.digest is not None
    async with site.client(bearer(**LEAD)) as http:
        await api_decide(site, http, pending.run_id, "approve")
        shown = (await http.get(f"/api/runs/{pending.run_id}")).json()
    approval = shown["approval"]
    assert approval["digest"] == pending.approval.digest and len(approval["digest"]) == 12
    assert [d["digest"] for d in approval["decisions"]] == [pending.approval.digest]
    assert approval["reason"] is None


async def test_the_limits_endpoint_answers_an_unknown_action_with_its_code(site: Site) -> None:
    async with site.client(bearer(**LEAD)) as http:
        unknown = await http.get("/api/limits/nope")
        none = await http.get("/api/limits/invoice.cancel?principal=agent-1")
    assert (unknown.status_code, unknown.json()["code"]) == (404, Code.ACTION_NOT_REGISTERED)
    assert (none.status_code, none.json()) == (200, {"limits": []})


async def test_an_approver_reads_only_runs_waiting_for_its_role_or_decided_by_it(
    site: Site,
) -> None:
    pending = await site.propose()
    path = f"/api/runs/{pending.run_id}"
    async with site.client(bearer(sub="clerk", roles=("support",))) as http:
        hidden = await http.get(path)
        missing = await http.get("/api/runs/0190aaaa-0000-7000-8000-000000000000")
    assert hidden.status_code == 404 and hidden.json() == missing.json()
    async with site.client(bearer(**LEAD)) as http:
        assert (await http.get(path)).status_code == 200
        assert (
            await api_decide(site, http, pending.run_id, json={"reason": "ok"})
        ).status_code == 200
        # Decided by this approver: still readable once it is no longer waiting.
        assert (await http.get(path)).json()["status"] == "SUCCEEDED"
    async with site.client(bearer(**LEAD2)) as http:
        # Same role, but it no longer waits and this approver did not decide it.
        assert (await http.get(path)).status_code == 404
