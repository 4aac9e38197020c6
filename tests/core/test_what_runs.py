"""What runs is what was approved (contract §12), on every store: amendments follow the
cumulative limits, decisions are bound to the view the approver was shown, an amendment leaves
earlier approvals behind, and a fleet mid-upgrade hands an approval over instead of denying it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from signoff import Code, Principal
from signoff.audit.verify import verify_trail
from signoff.core import substance
from signoff.core.clock import ManualClock
from signoff.core.definition import ActionDefinition, ApprovalSpec
from signoff.core.limits import LimitSpec, OnExceed
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import DecisionRequest, Runtime
from tests.helpers import LEAD, LEAD2, Recorder, approve, definition, proposal
from tests.store.conftest import Backend

HOUR = timedelta(hours=1)
AMEND = ApprovalSpec(when="true", approver_roles=("billing-lead",), amend=("amount",))
PAIR = AMEND.model_copy(update={"count": 2})
SUM_ASK = LimitSpec(name="per-hour", window=HOUR, sum="input.amount", max=20000)
SUM_DENY = SUM_ASK.model_copy(update={"on_exceed": OnExceed.DENY})
LEAD3 = Principal(id="lead-3", roles=("billing-lead",))


def amending(approver: Principal, version: int | None = None, **changes: Any) -> DecisionRequest:
    return replace(approve(approver), amendments=changes, expected_version=version)


def seen(request: DecisionRequest, version: int) -> DecisionRequest:
    return replace(request, expected_version=version)


async def runtime_on(
    backend: Backend, *definitions: ActionDefinition, clock: ManualClock | None = None
) -> Runtime:
    return Runtime(ActionRegistry(definitions), await backend.open(), clock=clock or ManualClock())


def invoice(n: int, amount: float, tenant: str) -> Any:
    return proposal({"invoice_id": f"INV-{n}", "amount": amount}, key=f"k{n}", tenant=tenant)


async def version_of(runtime: Runtime, run_id: str, tenant: str) -> int:
    run = await runtime.get_run(run_id, tenant)
    assert run is not None
    return run.version


async def executed_sum(recorder: Recorder) -> float:
    return sum(float(call.input["amount"]) for call in recorder.calls)


async def test_an_amendment_cannot_take_what_runs_past_a_deny_limit(
    backend: Backend, tenant: str
) -> None:
    """Eight proposals of 150 amended to 9,500 each: two fit the 20,000 an hour; the third
    amendment is refused (nothing written), the run still waits with its proposed 150."""
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=AMEND, limits=(SUM_DENY,)))
    answers = []
    for n in range(8):
        pending = await runtime.propose(invoice(n, 150, tenant))
        answers.append(await runtime.decide(pending.run_id, tenant, amending(LEAD, amount=9500)))
    codes = [a.code for a in answers]
    assert codes[:2] == [Code.SUCCEEDED, Code.SUCCEEDED]
    assert set(codes[2:]) == {Code.LIMIT_EXCEEDED}
    assert not any(a.accepted for a in answers[2:])
    assert await executed_sum(recorder) == 19000
    (usage,) = await runtime.limit_usage("invoice.cancel", tenant, principal_id="agent-1") or []
    # 19,000 executed and six pending runs of 150 held (they will run if approved as proposed).
    assert usage.total == 19000 + 6 * 150
    refused = answers[2].outcome
    assert refused is not None and refused.code == Code.APPROVAL_REQUIRED
    still = await runtime.get_run(refused.run_id, tenant)
    assert still is not None and substance.will_run(still)["amount"] == 150


async def test_an_amendment_over_an_approval_limit_is_parked_with_its_reason_never_run(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=AMEND, limits=(SUM_ASK,)))
    ids = []
    for n in range(3):
        pending = await runtime.propose(invoice(n, 150, tenant))
        ids.append(pending.run_id)
    for run_id in ids[:2]:
        assert (
            await runtime.decide(run_id, tenant, amending(LEAD, amount=9500))
        ).code == "SUCCEEDED"
    parked = await runtime.decide(ids[2], tenant, amending(LEAD, amount=9500))
    assert parked.code == Code.AMENDMENT_OVER_LIMIT and parked.accepted
    assert recorder.count == 2  # never executed on the amendment
    run = await runtime.get_run(ids[2], tenant)
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL and run.approval
    assert run.approval.reason is not None and "per-hour" in run.approval.reason
    assert substance.will_run(run)["amount"] == 9500
    assert substance.standing_approvers(run) == set()  # the amending vote did not count
    (usage,) = await runtime.limit_usage("invoice.cancel", tenant, principal_id="agent-1") or []
    assert usage.total == 3 * 9500  # the held amount follows what will run
    # An approval given on the view that shows the reason runs it, knowingly over the limit.
    knowingly = await runtime.decide(ids[2], tenant, seen(approve(LEAD), run.version))
    assert knowingly.code == Code.SUCCEEDED
    assert await executed_sum(recorder) == 3 * 9500


async def test_the_second_approver_decides_on_the_amended_value_or_not_at_all(
    backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=PAIR))
    pending = await runtime.propose(invoice(1, 12000, tenant))
    shown = await version_of(runtime, pending.run_id, tenant)
    first = await runtime.decide(pending.run_id, tenant, amending(LEAD, shown, amount=19900))
    assert first.code == Code.APPROVAL_RECORDED
    assert first.outcome is not None and first.outcome.approval is not None
    assert first.outcome.approval.approvals_received == 1
    assert first.outcome.approved_input == {"invoice_id": "INV-1", "amount": 19900}
    # The second approver was shown the run before the amendment: refused, nothing recorded.
    stale = await runtime.decide(pending.run_id, tenant, seen(approve(LEAD2), shown))
    assert stale.code == Code.APPROVAL_RUN_CHANGED and not stale.accepted
    assert stale.outcome is not None and stale.outcome.approved_input == {
        "invoice_id": "INV-1",
        "amount": 19900,
    }
    assert recorder.count == 0
    fresh = await version_of(runtime, pending.run_id, tenant)
    done = await runtime.decide(pending.run_id, tenant, seen(approve(LEAD2), fresh))
    assert done.code == Code.SUCCEEDED
    assert [call.input["amount"] for call in recorder.calls] == [19900]


async def test_an_amendment_leaves_earlier_approvals_behind(backend: Backend, tenant: str) -> None:
    recorder = Recorder()
    runtime = await runtime_on(backend, definition(recorder, approval=PAIR))
    pending = await runtime.propose(invoice(1, 12000, tenant))
    await runtime.decide(pending.run_id, tenant, approve(LEAD))
    amended = await runtime.decide(pending.run_id, tenant, amending(LEAD2, amount=15000))
    assert amended.code == Code.APPROVAL_RECORDED  # lead-1 approved 12,000, not 15,000
    run = await runtime.get_run(pending.run_id, tenant)
    assert run is not None and substance.standing_approvers(run) == {LEAD2.id}
    assert recorder.count == 0
    again = await runtime.decide(pending.run_id, tenant, approve(LEAD))
    assert again.code == Code.SUCCEEDED
    assert [call.input["amount"] for call in recorder.calls] == [15000]
    report = await verify_trail(await backend.open())
    assert [p.line() for p in report.problems if tenant in p.line()] == []


async def test_an_amended_and_approved_trail_verifies_clean(backend: Backend, tenant: str) -> None:
    runtime = await runtime_on(backend, definition(Recorder(), approval=AMEND))
    pending = await runtime.propose(invoice(1, 5000, tenant))
    assert (await runtime.decide(pending.run_id, tenant, amending(LEAD, amount=4000))).accepted
    report = await verify_trail(await backend.open(), tenant_id=tenant)
    assert report.problems == []


# ------------------------------------------------------------------------- a fleet mid-upgrade
async def two_revisions(backend: Backend, clock: ManualClock) -> tuple[Runtime, Runtime, Recorder]:
    """Two instances on one store holding different revisions of the same action."""
    recorder = Recorder()
    old = definition(recorder, approval=PAIR)
    new = definition(recorder, approval=PAIR, risk="critical")
    store = await backend.open()
    first = Runtime(ActionRegistry([old]), store, clock=clock, instance_id="old")
    second = Runtime(ActionRegistry([new]), store, clock=clock, instance_id="new")
    assert old.revision() != new.revision()
    await first.heartbeat()
    await second.heartbeat()
    return first, second, recorder


async def test_an_instance_on_another_revision_hands_the_dispatch_over(
    backend: Backend, tenant: str
) -> None:
    clock = ManualClock()
    old, new, recorder = await two_revisions(backend, clock)
    pending = await old.propose(invoice(1, 5000, tenant))
    assert (await old.decide(pending.run_id, tenant, approve(LEAD))).code == "APPROVAL_RECORDED"
    handed = await new.decide(pending.run_id, tenant, approve(LEAD2))
    assert handed.code == Code.APPROVAL_AWAITING_DISPATCH and handed.accepted
    assert await new.dispatch_approved() == 0  # not its revision: left to the old instance
    assert recorder.count == 0
    assert await old.dispatch_approved() == 1
    done = await old.get(pending.run_id, tenant)
    assert done is not None and done.code == Code.SUCCEEDED and recorder.count == 1


async def test_an_approval_under_a_revision_gone_from_the_fleet_is_asked_again_not_denied(
    backend: Backend, tenant: str
) -> None:
    clock = ManualClock()
    old, new, recorder = await two_revisions(backend, clock)
    pending = await old.propose(invoice(1, 5000, tenant))
    await old.decide(pending.run_id, tenant, approve(LEAD))
    await new.decide(pending.run_id, tenant, approve(LEAD2))  # handed over to the old revision
    clock.advance(timedelta(minutes=5))  # the old instance is gone (its heartbeat went stale)
    await new.heartbeat()
    assert await new.dispatch_approved() == 1
    asked = await new.get(pending.run_id, tenant)
    assert asked is not None and asked.code == Code.APPROVAL_REQUIRED
    assert asked.approval is not None and asked.approval.approvals_received == 0
    assert recorder.count == 0
    await new.decide(pending.run_id, tenant, approve(LEAD))
    done = await new.decide(pending.run_id, tenant, approve(LEAD3))
    assert done.code == Code.SUCCEEDED and recorder.count == 1
    report = await verify_trail(await backend.open(), tenant_id=tenant)
    assert report.problems == []
