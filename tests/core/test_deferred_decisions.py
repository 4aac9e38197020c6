"""Decisions are data: a decision recorded without dispatch (the CLI on the database) leaves the
run approved and waiting; a serving process dispatches it through the same stages, exactly once;
one OS user casts at most one vote per run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from signoff import Channel, Code, Principal
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec
from signoff.core.registry import ActionRegistry
from signoff.core.run import ApprovalVote, RunStatus
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import Recorder, definition, proposal

LARGE = {"invoice_id": "INV-2", "amount": 5000}
TWO = ApprovalSpec(when="true", approver_roles=("finance",), count=2)
FIN_1 = Principal(id="fin-1", roles=("finance",))
FIN_2 = Principal(id="fin-2", roles=("finance",))


def on_the_cli(
    approver: Principal, os_user: str, vote: ApprovalVote = ApprovalVote.APPROVE
) -> DecisionRequest:
    return DecisionRequest(
        approver=approver,
        vote=vote,
        reason="checked",
        channel=Channel.CLI,
        via=os_user,
        dispatch=False,
    )


def runtimes(count: int, recorder: Recorder, clock: ManualClock) -> list[Runtime]:
    """``count`` runtimes over one store: one CLI and the serving processes."""
    store = InMemoryStore()
    registry = ActionRegistry([definition(recorder, approval=TWO)])
    return [Runtime(registry, store, clock=clock, instance_id=f"p{i}") for i in range(count)]


async def test_one_os_user_casts_at_most_one_vote_whatever_names_it_gives() -> None:
    recorder, clock = Recorder(), ManualClock()
    (cli,) = runtimes(1, recorder, clock)
    pending = await cli.propose(proposal(LARGE))
    first = await cli.decide(pending.run_id, "acme", on_the_cli(FIN_1, "root"))
    second = await cli.decide(pending.run_id, "acme", on_the_cli(FIN_2, "root"))
    assert first.code == Code.APPROVAL_RECORDED and first.accepted
    assert (second.code, second.accepted) == (Code.APPROVAL_ALREADY_DECIDED, False)
    run = await cli.get_run(pending.run_id, "acme")
    assert run is not None and run.approval is not None and len(run.approval.decisions) == 1
    assert recorder.count == 0


async def test_a_quorum_reached_on_the_cli_waits_for_a_server_and_runs_there_once() -> None:
    recorder, clock = Recorder(), ManualClock()
    cli, *servers = runtimes(9, recorder, clock)
    pending = await cli.propose(proposal(LARGE))
    await cli.decide(pending.run_id, "acme", on_the_cli(FIN_1, "alice"))
    done = await cli.decide(pending.run_id, "acme", on_the_cli(FIN_2, "bob"))
    assert (done.code, done.accepted) == (Code.APPROVAL_AWAITING_DISPATCH, True)
    run = await cli.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.approved_at is not None
    assert recorder.count == 0
    # No more decisions on an approved run, and it does not expire while it waits for a server.
    late = await cli.decide(pending.run_id, "acme", on_the_cli(FIN_2, "carol", ApprovalVote.REJECT))
    assert late.code == Code.APPROVAL_NOT_PENDING
    clock.advance(timedelta(days=3))
    assert await cli.expire_overdue() == 0
    # Eight serving processes race; exactly one dispatches.
    counts = await asyncio.gather(*(server.dispatch_approved() for server in servers))
    for server in servers:
        await server.drain()
    assert sorted(counts) == [0] * 7 + [1]
    assert recorder.count == 1
    final = await cli.get(pending.run_id, "acme")
    assert final is not None and final.code == Code.SUCCEEDED
    assert await servers[0].dispatch_approved() == 0


async def test_a_server_dispatch_rechecks_policy_like_any_approval() -> None:
    recorder, clock = Recorder(), ManualClock()
    store = InMemoryStore()
    cli = Runtime(ActionRegistry([definition(recorder, approval=TWO)]), store, clock=clock)
    pending = await cli.propose(proposal(LARGE))
    await cli.decide(pending.run_id, "acme", on_the_cli(FIN_1, "alice"))
    await cli.decide(pending.run_id, "acme", on_the_cli(FIN_2, "bob"))
    # The server's manifests no longer let this principal propose it (and no instance holds
    # the revision it was approved under): refused, nobody is asked again.
    stricter = definition(
        recorder,
        approval=TWO,
        policy=definition(recorder).policy.model_copy(update={"roles": ("nobody",)}),
    )
    server = Runtime(ActionRegistry([stricter]), store, clock=clock)
    assert await server.dispatch_approved() == 1
    final = await server.get(pending.run_id, "acme")
    assert final is not None and final.code == Code.POLICY_REVALIDATION_DENIED
    assert recorder.count == 0
