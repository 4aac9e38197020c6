"""Requester confirmation through a real ``mcp.Client`` with an elicitation callback, in
process, on both protocol eras: 2026-07-28 (``InputRequiredResult``, the call retried with the
answer) and handshake-era sessions (``elicitation/create`` mid-call)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

import mcp_types as types
import pytest
from mcp import Client

from signoff import Code, ExecutionStatus
from signoff.core.identity import Channel
from signoff.core.registry import ActionRegistry
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp import SignoffMCP, fixed_identity
from tests.helpers import LEAD, Recorder
from tests.surfaces.confirming import CONFIRM_FIELD, PAY, Human, confirm_definitions

MODES = ["auto", "legacy"]


class World:
    def __init__(self, wait: timedelta = timedelta(seconds=30)) -> None:
        self.recorder = Recorder()
        registry = ActionRegistry(confirm_definitions(self.recorder, wait))
        self.runtime = Runtime(registry, InMemoryStore())

    def client(self, human: Human | None, mode: str = "auto", principal: str = "agent-1") -> Client:
        caller = make_caller(principal, "acme", "billing")
        surface = SignoffMCP(self.runtime, fixed_identity(caller), task_secret=b"s" * 32)
        return Client(surface.server, mode=mode, elicitation_callback=human)


def content(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_the_host_shows_what_will_run_and_an_accept_executes_it(mode: str) -> None:
    w, human = World(), Human("accept")
    async with w.client(human, mode) as client:
        done = content(await client.call_tool("invoice_pay", PAY))
    assert done["code"] == Code.SUCCEEDED and w.recorder.count == 1
    [form] = human.shown
    fields = form.requested_schema["properties"]
    assert fields["amount"]["enum"] == ["1,250.00 EUR"]  # display-formatted
    assert fields["invoice_id"]["enum"] == ["••••••"]  # sensitive: masked
    assert "INV-7" not in form.message
    run = await w.runtime.get_run(done["run_id"], "acme")
    assert run is not None and run.approval is not None and run.approval.confirmation is not None
    decision = run.approval.confirmation.decision
    assert decision is not None and decision.channel is Channel.ELICITATION
    assert decision.digest is not None and decision.digest[:12] in form.message


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_confirmation_refuses_with_its_own_code(
    mode: str, action: Literal["decline", "cancel"]
) -> None:
    w = World()
    async with w.client(Human(action), mode) as client:
        refused = content(await client.call_tool("invoice_pay", PAY))
    assert (refused["status"], refused["code"]) == (
        ExecutionStatus.DENIED,
        Code.CONFIRMATION_DECLINED,
    )
    assert w.recorder.count == 0


@pytest.mark.parametrize("mode", MODES)
async def test_an_accept_that_edits_a_shown_value_or_leaves_the_box_unticked_declines(
    mode: str,
) -> None:
    w = World()
    answers: list[dict[str, Any]] = [{CONFIRM_FIELD: False}, {CONFIRM_FIELD: True, "amount": "1"}]
    for n, answer in enumerate(answers):
        async with w.client(Human("accept", content=answer), mode) as client:
            arguments = {**PAY, "idempotency_key": f"edit-{n}"}
            refused = content(await client.call_tool("invoice_pay", arguments))
        assert refused["code"] == Code.CONFIRMATION_DECLINED
    assert w.recorder.count == 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_host_without_elicitation_gets_the_manifests_fallback(mode: str) -> None:
    w = World()
    async with w.client(None, mode) as client:
        refused = content(await client.call_tool("invoice_pay", PAY))
        routed = content(await client.call_tool("invoice_refund", PAY))
    assert refused["code"] == Code.CONFIRMATION_UNAVAILABLE
    assert routed["code"] == Code.APPROVAL_REQUIRED
    decided = await w.runtime.decide(
        routed["run_id"], "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE)
    )
    assert decided.code == Code.SUCCEEDED and w.recorder.count == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_confirmation_is_in_addition_to_a_four_eyes_approval(mode: str) -> None:
    w = World()
    async with w.client(Human("accept"), mode) as client:
        waiting = content(await client.call_tool("invoice_void", PAY))
    assert (waiting["status"], waiting["code"]) == (
        ExecutionStatus.PENDING_APPROVAL,
        Code.APPROVAL_REQUIRED,
    )
    assert w.recorder.count == 0
    decided = await w.runtime.decide(
        waiting["run_id"], "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE)
    )
    assert decided.code == Code.SUCCEEDED and w.recorder.count == 1


async def test_a_handshake_session_that_never_answers_leaves_a_pending_run() -> None:
    w = World(wait=timedelta(milliseconds=200))
    async with w.client(Human(None), "legacy") as client:
        pending = content(await client.call_tool("invoice_pay", PAY))
    assert (pending["status"], pending["code"]) == (
        ExecutionStatus.PENDING_APPROVAL,
        Code.CONFIRMATION_REQUIRED,
    )
    assert w.recorder.count == 0


async def test_an_unanswered_form_waits_and_only_the_same_principal_confirms_it_later() -> None:
    w = World()
    async with w.client(Human("accept")) as client:
        asked = await client.session.call_tool("invoice_pay", PAY, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult) and asked.input_requests
        state = asked.request_state
        pending = content(await client.call_tool("signoff_get_run", {"run_id": _run_id(state)}))
    assert pending["code"] == Code.CONFIRMATION_REQUIRED and w.recorder.count == 0
    accept: types.InputResponses = {
        "confirm": types.ElicitResult(action="accept", content={CONFIRM_FIELD: True})
    }
    async with w.client(Human("accept"), principal="agent-2") as stranger:
        other = await stranger.session.call_tool(
            "invoice_pay", PAY, input_responses=accept, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
    assert isinstance(other, types.CallToolResult)
    assert content(other)["code"] == Code.ACTION_RUN_NOT_FOUND and w.recorder.count == 0
    async with w.client(Human("accept")) as later:  # a new session of the same principal
        done = await later.session.call_tool(
            "invoice_pay", PAY, input_responses=accept, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
    assert isinstance(done, types.CallToolResult)
    assert content(done)["code"] == Code.SUCCEEDED and w.recorder.count == 1


def _run_id(state: str | None) -> str:
    assert state is not None
    return state.removeprefix("signoff-confirm:").rpartition(".")[0]
