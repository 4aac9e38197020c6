"""Cumulative limits and approval digests through the governed pipeline (memory and SQLite)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from signoff import ActionProposal, ExecutionContext, GuardDecision, Principal
from signoff.core.clock import ManualClock
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import ActionDefinition
from signoff.core.limits import LimitSpec
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.factory import open_store
from signoff.store.memory import InMemoryStore
from tests.helpers import (
    AGENT,
    LEAD,
    LEAD2,
    NO_APPROVAL,
    Recorder,
    approve,
    definition,
    proposal,
    reject,
)

Factory = Callable[[], Awaitable[Store]]
DAY = timedelta(hours=24)
DENY_TWO = LimitSpec(name="two-a-day", window=DAY, count=2, on_exceed="deny")
ASK_OVER_1000 = LimitSpec(name="refunds", window=DAY, sum="input.amount", max=1000)
TENANT_THREE = LimitSpec(name="tenant", per="tenant", window=DAY, count=3, on_exceed="deny")
OTHER = Principal(id="agent-2", roles=("billing",))


@pytest.fixture(params=["memory", "sqlite"])
async def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    stores: list[Store] = []

    async def make() -> Store:
        store = (
            InMemoryStore()
            if request.param == "memory"
            else await open_store(f"sqlite+aiosqlite:///{tmp_path / 'l.db'}")
        )
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()


REGISTRIES: dict[int, ActionRegistry] = {}


async def runtime_with(
    make: Factory, *definitions: ActionDefinition
) -> tuple[Runtime, ManualClock]:
    clock = ManualClock()
    store = await make()
    registry = ActionRegistry(definitions)
    runtime = Runtime(registry, store, clock=clock)
    REGISTRIES[id(runtime)] = registry
    return runtime, clock


def call(n: int, amount: float = 10, who: Principal = AGENT) -> ActionProposal:
    return proposal(
        {"invoice_id": f"INV-{n}", "amount": amount}, key=f"k{n}-{who.id}", principal=who
    )


async def test_exactly_at_the_count_runs_and_one_more_is_refused_saying_when_it_frees_up(
    store_factory: Factory,
) -> None:
    recorder = Recorder()
    runtime, clock = await runtime_with(
        store_factory, definition(recorder, approval=NO_APPROVAL, limits=(DENY_TWO,))
    )
    first = await runtime.propose(call(1))
    clock.advance(timedelta(hours=1))
    assert (await runtime.propose(call(2))).code == Code.SUCCEEDED
    third = await runtime.propose(call(3))
    assert (third.status, third.code, third.retry) == (
        ExecutionStatus.DENIED,
        Code.LIMIT_EXCEEDED,
        RetryDisposition.NEVER,
    )
    assert "limit 'two-a-day'" in third.message and "3 of 2 calls, over by 1 call" in third.message
    frees = (clock.now() - timedelta(hours=1) + DAY).isoformat().replace("+00:00", "Z")
    assert f"it frees up at {frees}" in third.message
    assert recorder.count == 2 and first.code == Code.SUCCEEDED
    clock.advance(DAY - timedelta(hours=1))  # the first call slides out of the window
    assert (await runtime.propose(call(4))).code == Code.SUCCEEDED
    # The refused key was given back: the same key goes through once there is room again.
    clock.advance(timedelta(hours=2))
    assert (await runtime.propose(call(3))).code == Code.SUCCEEDED


async def test_per_principal_limits_count_each_principal_and_tenant_limits_everyone(
    store_factory: Factory,
) -> None:
    runtime, _ = await runtime_with(
        store_factory,
        definition(Recorder(), approval=NO_APPROVAL, limits=(DENY_TWO, TENANT_THREE)),
    )
    assert (await runtime.propose(call(1))).code == Code.SUCCEEDED
    assert (await runtime.propose(call(2))).code == Code.SUCCEEDED
    assert (await runtime.propose(call(3))).code == Code.LIMIT_EXCEEDED  # agent-1's two
    assert (await runtime.propose(call(4, who=OTHER))).code == Code.SUCCEEDED
    refused = await runtime.propose(call(5, who=OTHER))  # the tenant's three
    assert refused.code == Code.LIMIT_EXCEEDED and "limit 'tenant'" in refused.message


async def test_over_an_approval_limit_the_call_waits_saying_which_limit_and_how_far_over(
    store_factory: Factory,
) -> None:
    recorder = Recorder()
    spec = definition(
        recorder,
        approval=NO_APPROVAL.model_copy(update={"approver_roles": ("billing-lead",)}),
        limits=(ASK_OVER_1000,),
    )
    runtime, _ = await runtime_with(store_factory, spec)
    assert (await runtime.propose(call(1, 900))).code == Code.SUCCEEDED
    parked = await runtime.propose(call(2, 300))
    assert parked.code == Code.APPROVAL_REQUIRED and parked.approval is not None
    assert parked.approval.reason == (
        "Over the limit 'refunds' (per principal, 1d): 1200 of 1000, over by 200."
    )
    assert parked.approval.digest is not None and len(parked.approval.digest) == 12
    decided = await runtime.decide(parked.run_id, "acme", approve(LEAD))
    assert decided.outcome is not None and decided.outcome.code == Code.SUCCEEDED
    assert recorder.count == 2
    # The approved overage counts: the next call is over as well.
    assert (await runtime.propose(call(3, 1))).code == Code.APPROVAL_REQUIRED


@pytest.mark.parametrize("ending", ["rejected", "expired", "cancelled", "guard_denied"])
async def test_a_run_that_ends_without_executing_gives_its_reservation_back(
    store_factory: Factory, ending: str
) -> None:
    one = LimitSpec(name="one", window=DAY, count=1, on_exceed="deny")

    def guard(context: ExecutionContext) -> GuardDecision:
        return (
            GuardDecision.deny("NOT_TODAY", "no")
            if ending == "guard_denied"
            else GuardDecision.allow()
        )

    approval = NO_APPROVAL if ending == "guard_denied" else None
    spec = definition(
        Recorder(), limits=(one,), guard=guard, **({"approval": approval} if approval else {})
    )
    runtime, clock = await runtime_with(store_factory, spec)
    first = await runtime.propose(call(1, 5000))
    if ending == "rejected":
        await runtime.decide(first.run_id, "acme", reject(LEAD))
    elif ending == "expired":
        clock.advance(timedelta(hours=25))
        assert await runtime.expire_overdue() == 1
    elif ending == "cancelled":
        assert (await runtime.cancel(first.run_id, "acme", AGENT)).code == Code.ACTION_CANCELLED
    else:
        assert first.code == "NOT_TODAY"
    second = await runtime.propose(call(2, 10))
    assert second.code in (Code.SUCCEEDED, "NOT_TODAY"), second
    if ending != "guard_denied":
        assert second.code == Code.SUCCEEDED


async def test_an_executed_run_keeps_its_reservation(store_factory: Factory) -> None:
    one = LimitSpec(name="one", window=DAY, count=1, on_exceed="deny")
    runtime, _ = await runtime_with(
        store_factory, definition(Recorder(), approval=NO_APPROVAL, limits=(one,))
    )
    assert (await runtime.propose(call(1))).code == Code.SUCCEEDED
    assert (await runtime.propose(call(2))).code == Code.LIMIT_EXCEEDED


async def test_a_waiting_run_holds_its_reservation_and_resume_rechecks_the_limits(
    store_factory: Factory,
) -> None:
    """Approval pending: the call counts against the next one; at resume, a deny limit that the
    current definition sets lower refuses instead of dispatching."""
    recorder = Recorder()
    two = LimitSpec(name="two", window=DAY, count=2, on_exceed="deny")
    registry_spec = definition(recorder, limits=(two,))
    runtime, _ = await runtime_with(store_factory, registry_spec)
    pending = await runtime.propose(call(1, 5000))
    assert pending.code == Code.APPROVAL_REQUIRED
    assert (await runtime.propose(call(2, 10))).code == Code.SUCCEEDED
    assert (await runtime.propose(call(3, 10))).code == Code.LIMIT_EXCEEDED  # pending one counts
    lower = definition(recorder, limits=(two.model_copy(update={"count": 1}),))
    REGISTRIES[id(runtime)].replace([lower])
    decided = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert decided.outcome is not None
    assert decided.outcome.code == Code.LIMIT_EXCEEDED
    assert recorder.count == 1


async def test_a_vote_cast_on_an_older_definition_is_asked_again_never_denied(
    store_factory: Factory,
) -> None:
    """The definition changed while the run waited and no instance holds the old revision any
    more: the approval is asked again under the new one (the earlier vote stays on the record
    and no longer counts); nothing is denied and nothing runs until the new quorum."""
    recorder = Recorder()
    quorum = definition(recorder).approval.model_copy(update={"count": 2})
    runtime, _ = await runtime_with(store_factory, definition(recorder, approval=quorum))
    pending = await runtime.propose(call(1, 5000))
    assert (await runtime.decide(pending.run_id, "acme", approve(LEAD))).code == "APPROVAL_RECORDED"
    REGISTRIES[id(runtime)].replace([definition(recorder, approval=quorum, risk="critical")])
    decided = await runtime.decide(pending.run_id, "acme", approve(LEAD2))
    assert decided.code == Code.APPROVAL_RECORDED
    assert decided.outcome is not None and decided.outcome.code == Code.APPROVAL_REQUIRED
    assert decided.outcome.approval is not None
    assert decided.outcome.approval.approvals_received == 1
    again = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert again.code == Code.SUCCEEDED
    assert recorder.count == 1


async def test_usage_is_visible_per_limit_and_subject(store_factory: Factory) -> None:
    runtime, _ = await runtime_with(
        store_factory,
        definition(Recorder(), approval=NO_APPROVAL, limits=(DENY_TWO, TENANT_THREE)),
    )
    await runtime.propose(call(1))
    await runtime.propose(call(2, who=OTHER))
    usage = await runtime.limit_usage("invoice.cancel", "acme", principal_id="agent-1")
    assert usage is not None
    assert {(u.check.spec.name, u.count) for u in usage} == {("two-a-day", 1), ("tenant", 2)}
    tenant_only = await runtime.limit_usage("invoice.cancel", "acme")
    assert tenant_only is not None and [u.check.spec.name for u in tenant_only] == ["tenant"]
    assert await runtime.limit_usage("nope", "acme") is None
