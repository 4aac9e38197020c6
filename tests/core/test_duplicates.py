"""Idempotency: replay only after the new request passed resolve, validate and policy."""

from __future__ import annotations

from signoff import Code, ExecutionResult, ExecutionStatus, Principal, RetryDisposition
from signoff.core.definition import IdempotencySpec
from tests.helpers import (
    AGENT,
    NO_APPROVAL,
    SMALL,
    Recorder,
    definition,
    memory_runtime,
    proposal,
)


async def test_idempotent_replay_returns_the_first_result_without_a_second_side_effect() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    first = await runtime.propose(proposal(SMALL))
    second = await runtime.propose(proposal({"amount": 10, "invoice_id": "INV-1"}))
    assert first.code == second.code == Code.SUCCEEDED
    assert second.output == first.output
    assert second.duplicate_of == first.run_id
    assert second.run_id != first.run_id
    assert recorder.count == 1


async def test_a_failure_is_replayed_too_the_first_terminal_result_is_kept() -> None:
    calls = 0

    async def flaky(context: object) -> object:
        nonlocal calls
        calls += 1
        return ExecutionResult.retryable_failure("UPSTREAM_BUSY", "try later")

    runtime = memory_runtime(definition(flaky))
    first = await runtime.propose(proposal(SMALL))
    second = await runtime.propose(proposal(SMALL))
    assert first.code == second.code == "UPSTREAM_BUSY"
    assert second.retry is RetryDisposition.AFTER_BACKOFF
    assert calls == 1


async def test_denied_principal_replay_gets_a_policy_denial_and_no_cached_output() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    done = await runtime.propose(proposal(SMALL))
    assert done.code == Code.SUCCEEDED
    intruder = Principal(id=AGENT.id, roles=("support",))  # same id, role revoked
    other = Principal(id="mallory", roles=("support",))
    for principal in (intruder, other):
        retry = await runtime.propose(proposal(SMALL, principal=principal))
        assert retry.code == Code.POLICY_DENIED
        assert retry.output is None
        assert retry.duplicate_of is None
        assert done.run_id not in retry.message
    assert recorder.count == 1


async def test_cross_resource_reuse_never_returns_resource_a_result_for_resource_b() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    for_a = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
    for_b = await runtime.propose(proposal({"invoice_id": "INV-2", "amount": 10}))
    assert for_a.code == for_b.code == Code.SUCCEEDED
    assert for_b.duplicate_of is None
    assert for_b.output is not None and for_b.output["done"]["invoice_id"] == "INV-2"
    assert recorder.count == 2


async def test_principal_scope_keeps_one_principals_result_from_another() -> None:
    recorder = Recorder()
    scoped = IdempotencySpec(key="required", scope="principal")
    runtime = memory_runtime(definition(recorder, idempotency=scoped, approval=NO_APPROVAL))
    mine = await runtime.propose(proposal(SMALL))
    theirs = await runtime.propose(
        proposal(SMALL, principal=Principal(id="agent-2", roles=("billing",)))
    )
    assert theirs.duplicate_of is None
    assert theirs.run_id != mine.run_id
    assert recorder.count == 2


async def test_tenant_scope_shares_one_result_tenant_wide_when_opted_in() -> None:
    recorder = Recorder()
    shared = IdempotencySpec(key="required", scope="tenant")
    runtime = memory_runtime(definition(recorder, idempotency=shared))
    mine = await runtime.propose(proposal(SMALL))
    theirs = await runtime.propose(
        proposal(SMALL, principal=Principal(id="agent-2", roles=("billing",)))
    )
    assert theirs.duplicate_of == mine.run_id
    assert recorder.count == 1


async def test_the_same_key_in_another_tenant_is_independent() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    acme = await runtime.propose(proposal(SMALL, tenant="acme"))
    globex = await runtime.propose(proposal(SMALL, tenant="globex"))
    assert globex.duplicate_of is None and acme.duplicate_of is None
    assert recorder.count == 2
    assert await runtime.get(acme.run_id, "globex") is None


async def test_the_same_key_for_another_action_is_independent() -> None:
    recorder = Recorder()
    runtime = memory_runtime(
        definition(recorder), definition(recorder, id="invoice.remind", approval=NO_APPROVAL)
    )
    await runtime.propose(proposal(SMALL))
    other = await runtime.propose(proposal(SMALL, action="invoice.remind"))
    assert other.duplicate_of is None
    assert recorder.count == 2


async def test_key_reuse_with_different_input_is_refused_and_discloses_nothing() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    first = await runtime.propose(proposal(SMALL))
    reused = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 11}))
    assert reused.code == Code.IDEMPOTENCY_KEY_REUSED
    assert reused.retry is RetryDisposition.AFTER_CORRECTION
    assert reused.output is None and reused.duplicate_of is None
    assert first.run_id not in reused.message
    assert recorder.count == 1


async def test_a_duplicate_of_a_pending_run_is_in_progress_and_points_at_the_original() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    large = {"invoice_id": "INV-2", "amount": 5000}
    pending = await runtime.propose(proposal(large))
    again = await runtime.propose(proposal(large))
    assert again.code == Code.DUPLICATE_IN_PROGRESS
    assert again.retry is RetryDisposition.AFTER_BACKOFF
    assert again.status is ExecutionStatus.DENIED
    assert again.duplicate_of == pending.run_id
    assert recorder.count == 0


async def test_without_a_key_every_call_is_its_own_operation() -> None:
    recorder = Recorder()
    optional = IdempotencySpec(key="optional", scope="principal")
    runtime = memory_runtime(definition(recorder, idempotency=optional))
    await runtime.propose(proposal(SMALL, key=None))
    await runtime.propose(proposal(SMALL, key=None))
    assert recorder.count == 2


async def test_a_retry_that_reserialises_a_number_is_the_same_input_and_replays() -> None:
    """``10``, ``10.0`` and ``1e1`` are one value: a client that re-serialises on retry is told
    the first result, never to use a new key (which could make the effect happen twice)."""
    import json

    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    first = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
    spellings = [
        json.loads('{"invoice_id": "INV-1", "amount": ' + n + "}") for n in ("10.0", "1e1")
    ]
    for again in spellings:
        replay = await runtime.propose(proposal(again))
        assert replay.code == Code.SUCCEEDED
        assert replay.duplicate_of == first.run_id
    different = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10.5}))
    assert different.code == Code.IDEMPOTENCY_KEY_REUSED
    assert recorder.count == 1
