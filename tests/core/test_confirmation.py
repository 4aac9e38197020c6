"""Requester confirmation (``approval.confirm``) on every store, with a confirmer that answers
as told: accept runs, decline refuses, no answer leaves a durable pending run that only the
requester confirms later, a host that cannot ask gets the manifest's fallback, a confirmation
never stands in for an approver, limits count it and the trail verifies clean."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from signoff import Code, ExecutionStatus, Principal
from signoff.audit.verify import verify_trail
from signoff.core import substance
from signoff.core.clock import ManualClock
from signoff.core.confirmer import ConfirmationAnswer, ConfirmationRequest
from signoff.core.definition import ActionDefinition, ApprovalSpec, ConfirmFallback, ConfirmSpec
from signoff.core.identity import Channel
from signoff.core.limits import LimitSpec
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from signoff.core.visibility import MASK
from tests.helpers import AGENT, LEAD, Recorder, approve, definition, proposal
from tests.store.conftest import Backend

CONFIRM = ApprovalSpec(when="false", confirm=ConfirmSpec(when="input.amount > 100.0"))
TO_APPROVERS = ApprovalSpec(
    when="false", confirm=ConfirmSpec(fallback=ConfirmFallback.APPROVERS),
    approver_roles=("billing-lead",),
)  # fmt: skip
FOUR_EYES = ApprovalSpec(when="true", approver_roles=("billing-lead",), confirm=ConfirmSpec())
OTHER = Principal(id="agent-2", roles=("billing",))


@dataclass
class Asked:
    """A confirmer that answers ``answer`` (``None``: no answer) and keeps what it was shown."""

    answer: ConfirmationAnswer | None
    available: bool = True
    shown: list[ConfirmationRequest] = field(default_factory=list)

    async def ask(self, request: ConfirmationRequest) -> ConfirmationAnswer | None:
        self.shown.append(request)
        return self.answer


async def runtime_on(
    backend: Backend, *definitions: ActionDefinition, clock: ManualClock | None = None
) -> Runtime:
    return Runtime(ActionRegistry(definitions), await backend.open(), clock=clock or ManualClock())


def pay(n: int, amount: float, tenant: str, principal: Principal = AGENT):  # type: ignore[no-untyped-def]
    return proposal(
        {"invoice_id": f"INV-{n}", "amount": amount}, key=f"k{n}", tenant=tenant,
        principal=principal,
    )  # fmt: skip


async def clean(backend: Backend, tenant: str) -> None:
    report = await verify_trail(await backend.open(), tenant_id=tenant)
    assert [p.line() for p in report.problems] == []


async def test_an_accepted_confirmation_runs_what_was_shown_and_records_it(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(
        backend, definition(recorder, approval=CONFIRM, sensitive_fields=("invoice_id",))
    )
    confirmer = Asked(ConfirmationAnswer.ACCEPT)
    outcome = await runtime.propose(pay(1, 500, tenant), confirmer)
    assert outcome.code == Code.SUCCEEDED and recorder.count == 1
    [request] = confirmer.shown
    assert request.values == {"invoice_id": MASK, "amount": 500}  # sensitive values masked
    run = await runtime.get_run(outcome.run_id, tenant)
    assert run is not None and run.approval is not None
    confirmation = run.approval.confirmation
    assert confirmation is not None and confirmation.decision is not None
    assert confirmation.decision.channel is Channel.ELICITATION
    assert confirmation.decision.digest == request.digest == substance.of(run).will_run_digest
    await clean(backend, tenant)


async def test_a_small_call_is_not_confirmed_when_the_rule_does_not_match(
    backend: Backend, tenant: str
) -> None:
    runtime = await runtime_on(backend, definition(Recorder(), approval=CONFIRM))
    confirmer = Asked(ConfirmationAnswer.DECLINE)
    assert (await runtime.propose(pay(1, 50, tenant), confirmer)).code == Code.SUCCEEDED
    assert confirmer.shown == []


async def test_a_declined_or_cancelled_confirmation_refuses_and_runs_nothing(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=CONFIRM))
    for n, answer in enumerate((ConfirmationAnswer.DECLINE, ConfirmationAnswer.CANCEL)):
        outcome = await runtime.propose(pay(n, 500, tenant), Asked(answer))
        assert (outcome.status, outcome.code) == (
            ExecutionStatus.DENIED,
            Code.CONFIRMATION_DECLINED,
        )
    assert recorder.count == 0
    await clean(backend, tenant)


async def test_no_answer_waits_durably_and_only_the_requester_confirms_it_later(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=CONFIRM))
    pending = await runtime.propose(pay(1, 500, tenant), Asked(None))
    assert (pending.status, pending.code) == (
        ExecutionStatus.PENDING_APPROVAL,
        Code.CONFIRMATION_REQUIRED,
    )
    later = await runtime_on(backend, definition(recorder, approval=CONFIRM))  # another process
    stranger = await later.confirm(pending.run_id, tenant, OTHER, ConfirmationAnswer.ACCEPT)
    assert stranger.code == Code.ACTION_RUN_NOT_FOUND
    elsewhere = await later.confirm(pending.run_id, "other", AGENT, ConfirmationAnswer.ACCEPT)
    assert elsewhere.code == Code.ACTION_RUN_NOT_FOUND
    # An approver cannot stand in for the requester either.
    assert (await later.decide(pending.run_id, tenant, approve(LEAD))).accepted is False
    assert recorder.count == 0
    confirmed = await later.confirm(pending.run_id, tenant, AGENT, ConfirmationAnswer.ACCEPT)
    assert confirmed.code == Code.SUCCEEDED and recorder.count == 1
    again = await later.confirm(pending.run_id, tenant, AGENT, ConfirmationAnswer.ACCEPT)
    assert again.code == Code.SUCCEEDED and recorder.count == 1  # answered once
    await clean(backend, tenant)


async def test_an_answer_on_another_view_is_not_recorded(backend: Backend, tenant: str) -> None:
    runtime = await runtime_on(backend, definition(Recorder(), approval=CONFIRM))
    pending = await runtime.propose(pay(1, 500, tenant), Asked(None))
    stale = await runtime.confirm(
        pending.run_id, tenant, AGENT, ConfirmationAnswer.ACCEPT, shown="0" * 64
    )
    assert stale.code == Code.CONFIRMATION_REQUIRED


async def test_an_unconfirmed_run_expires_with_its_own_code(backend: Backend, tenant: str) -> None:
    clock = ManualClock()
    runtime = await runtime_on(backend, definition(Recorder(), approval=CONFIRM), clock=clock)
    pending = await runtime.propose(pay(1, 500, tenant), Asked(None))
    clock.advance(timedelta(hours=25))
    late = await runtime.confirm(pending.run_id, tenant, AGENT, ConfirmationAnswer.ACCEPT)
    assert late.code == Code.CONFIRMATION_EXPIRED
    run = await runtime.get_run(pending.run_id, tenant)
    assert run is not None and run.status is RunStatus.EXPIRED


async def test_a_host_that_cannot_ask_gets_the_manifests_fallback(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    refusing = await runtime_on(backend, definition(recorder, approval=CONFIRM))
    for confirmer in (None, Asked(ConfirmationAnswer.ACCEPT, available=False)):
        refused = await refusing.propose(pay(1, 500, tenant), confirmer)
        assert refused.code == Code.CONFIRMATION_UNAVAILABLE
    routing = await runtime_on(
        backend, definition(recorder, id="invoice.pay", approval=TO_APPROVERS)
    )
    routed = await routing.propose(
        proposal(
            {"invoice_id": "INV-9", "amount": 5}, key="k9", tenant=tenant, action="invoice.pay"
        )
    )
    assert routed.code == Code.APPROVAL_REQUIRED
    assert (await routing.decide(routed.run_id, tenant, approve(LEAD))).code == Code.SUCCEEDED
    assert recorder.count == 1
    await clean(backend, tenant)


async def test_a_confirmation_never_satisfies_an_approval_rule(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=FOUR_EYES))
    early = await runtime.propose(pay(1, 500, tenant), Asked(None))
    refused = await runtime.decide(early.run_id, tenant, approve(LEAD))
    assert refused.code == Code.CONFIRMATION_REQUIRED  # the requester confirms first
    confirmed = await runtime.propose(pay(2, 500, tenant), Asked(ConfirmationAnswer.ACCEPT))
    assert (confirmed.status, confirmed.code) == (
        ExecutionStatus.PENDING_APPROVAL,
        Code.APPROVAL_REQUIRED,
    )
    self_approval = await runtime.decide(confirmed.run_id, tenant, approve(AGENT))
    assert self_approval.code == Code.APPROVER_NOT_ELIGIBLE and recorder.count == 0
    done = await runtime.decide(confirmed.run_id, tenant, approve(LEAD))
    assert done.code == Code.SUCCEEDED and recorder.count == 1
    await clean(backend, tenant)


async def test_limits_count_a_confirmed_run_like_any_decided_one(
    backend: Backend, tenant: str
) -> None:
    one = LimitSpec(name="one", window=timedelta(days=1), count=1, on_exceed="deny")
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=CONFIRM, limits=(one,)))
    pending = await runtime.propose(pay(1, 500, tenant), Asked(None))
    # The pending confirmation holds the limit: a second call is over it.
    over = await runtime.propose(pay(2, 500, tenant), Asked(ConfirmationAnswer.ACCEPT))
    assert over.code == Code.LIMIT_EXCEEDED
    confirmed = await runtime.confirm(pending.run_id, tenant, AGENT, ConfirmationAnswer.ACCEPT)
    assert confirmed.code == Code.SUCCEEDED
    after = await runtime.propose(pay(3, 500, tenant), Asked(ConfirmationAnswer.ACCEPT))
    assert after.code == Code.LIMIT_EXCEEDED and recorder.count == 1
    await clean(backend, tenant)


async def test_an_edited_confirmation_fails_audit_verify(backend: Backend, tenant: str) -> None:
    if backend.name != "sqlite":
        pytest.skip("edits the SQLite file behind signoff's back")
    assert backend.url is not None
    runtime = await runtime_on(backend, definition(Recorder(), approval=CONFIRM))
    outcome = await runtime.propose(pay(1, 500, tenant), Asked(ConfirmationAnswer.ACCEPT))
    await clean(backend, tenant)
    await backend.close_all()
    with sqlite3.connect(backend.url.split("///", 1)[1]) as db:
        [(data,)] = db.execute(
            "SELECT data FROM signoff_runs WHERE run_id = ?", (outcome.run_id,)
        ).fetchall()
        edited = json.loads(data)
        edited["approval"]["confirmation"]["decision"]["approver_id"] = "someone-else"
        db.execute(
            "UPDATE signoff_runs SET data = ? WHERE run_id = ?",
            (json.dumps(edited), outcome.run_id),
        )
    report = await verify_trail(await backend.open(), tenant_id=tenant)
    assert any("requester confirmation" in p.line() for p in report.problems)


async def test_an_approver_cannot_amend_what_the_requester_confirmed(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    amendable = FOUR_EYES.model_copy(update={"amend": ("amount",)})
    runtime = await runtime_on(backend, definition(recorder, approval=amendable))
    confirmed = await runtime.propose(pay(1, 500, tenant), Asked(ConfirmationAnswer.ACCEPT))
    amending = replace(approve(LEAD), amendments={"amount": 5})
    refused = await runtime.decide(confirmed.run_id, tenant, amending)
    assert refused.code == Code.AMENDMENT_NOT_ALLOWED and recorder.count == 0
    done = await runtime.decide(confirmed.run_id, tenant, approve(LEAD))
    assert done.code == Code.SUCCEEDED
    assert [call.input["amount"] for call in recorder.calls] == [500]
