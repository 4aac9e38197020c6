"""The MCP surface through the public in-memory ``mcp.Client``: tools, results, identity, runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema_rs
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from signoff import Code, ExecutionStatus, RetryDisposition, RunStatus
from signoff.core.definition import PolicySpec
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest
from tests.helpers import LARGE, LEAD, SMALL, definition
from tests.surfaces.support import (
    DEADLINE,
    Gate,
    check_output,
    lookup_definition,
    tool_named,
    until_final,
    world,
)


async def test_the_tool_list_shows_the_actions_the_callers_roles_may_propose() -> None:
    w = world(definition(lambda c: {}, id="payroll.run", policy=PolicySpec(roles=("payroll",))))
    async with w.client(roles="billing") as billing, w.client(roles="payroll") as payroll:
        billing_tools = {t.name for t in (await billing.list_tools()).tools}
        payroll_tools = {t.name for t in (await payroll.list_tools()).tools}
    builtins = {"signoff_get_run", "signoff_cancel_run", "signoff_list_runs"}
    assert billing_tools == {"invoice_cancel", "invoice_get"} | builtins
    assert payroll_tools == {"payroll_run", "invoice_get"} | builtins


async def test_an_action_tool_advertises_its_schema_plus_key_and_the_outcome_schema() -> None:
    w = world()
    async with w.client() as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_cancel")
    assert tool.input_schema["properties"]["invoice_id"] == {
        "type": "string",
        "pattern": "^INV-[0-9]+$",
    }
    assert tool.input_schema["properties"]["idempotency_key"]["type"] == "string"
    assert set(tool.input_schema["required"]) == {"invoice_id", "amount", "idempotency_key"}
    assert tool.output_schema is not None
    assert set(tool.output_schema["required"]) >= {"run_id", "action", "status", "code", "retry"}
    assert tool.description is not None
    assert "approval" in tool.description and "idempotency_key" in tool.description


async def test_an_optional_key_is_advertised_but_not_required() -> None:
    w = world()
    async with w.client() as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_get")
    assert "idempotency_key" in tool.input_schema["properties"]
    assert "idempotency_key" not in tool.input_schema["required"]


@pytest.mark.parametrize(
    ("effect", "read_only", "destructive"),
    [
        ("read_only", True, None),
        ("write", False, True),
        ("financial", False, True),
        ("production_change", False, True),
        ("external_send", False, False),
    ],
)
async def test_annotations_follow_the_effect(
    effect: str, read_only: bool, destructive: bool | None
) -> None:
    w = world(definition(lambda c: {}, id="probe.action", effect=effect))
    async with w.client() as client:
        tool = tool_named((await client.list_tools()).tools, "probe_action")
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is read_only
    assert tool.annotations.destructive_hint is destructive
    assert tool.annotations.idempotent_hint is True  # the key is required for this action


async def test_a_call_returns_the_outcome_as_structured_content_and_one_json_text_block() -> None:
    w = world()
    async with w.client() as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_cancel")
        result = await client.call_tool("invoice_cancel", {**SMALL, "idempotency_key": "k-1"})
    outcome = check_output(tool, result)
    assert result.is_error is False
    assert outcome["status"] == ExecutionStatus.SUCCEEDED
    assert outcome["code"] == Code.SUCCEEDED
    assert w.recorder.count == 1


async def test_invalid_input_still_gets_a_run_a_code_and_an_audit_entry() -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool(
            "invoice_cancel", {"invoice_id": "nope", "amount": -1, "idempotency_key": "k-1"}
        )
        assert result.is_error is True
        outcome = result.structured_content
        assert outcome is not None and outcome["code"] == Code.INPUT_VALIDATION_FAILED
        assert outcome["retry"] == RetryDisposition.AFTER_CORRECTION
        again = await client.call_tool("signoff_get_run", {"run_id": outcome["run_id"]})
    assert again.structured_content is not None
    assert again.structured_content["code"] == Code.INPUT_VALIDATION_FAILED
    kinds = [e.kind for e in await w.audit(outcome["run_id"])]
    assert kinds[0] == "proposed" and kinds[-1] == "refused"
    assert w.recorder.count == 0


async def test_arguments_of_the_wrong_type_reach_the_pipeline_and_are_refused_there() -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool("invoice_get", {"invoice_id": 42})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.INPUT_VALIDATION_FAILED


async def test_identity_comes_from_the_session_never_from_the_arguments() -> None:
    open_schema = {"type": "object", "properties": {}, "additionalProperties": True}
    w = world(lookup_definition(w_recorder := _Capture(), id="notes.add", input_schema=open_schema))
    async with w.client(principal="agent-7", tenant="acme", roles="billing") as client:
        result = await client.call_tool(
            "notes_add",
            {"principal": "root", "tenant_id": "evil", "roles": ["admin"], "tenant": "evil"},
        )
    assert result.structured_content is not None
    run_id = result.structured_content["run_id"]
    async with w.store.unit() as unit:
        run = await unit.runs.get(run_id)
    assert run is not None
    assert (run.principal.id, run.tenant_id, run.principal.roles) == (
        "agent-7",
        "acme",
        ("billing",),
    )
    assert str(run.channel) == "mcp" and str(run.proposer_type) == "agent"
    assert w_recorder.contexts[0].principal.id == "agent-7"
    assert w_recorder.contexts[0].tenant_id == "acme"


class _Capture:
    def __init__(self) -> None:
        self.contexts: list[Any] = []

    async def __call__(self, context: Any) -> dict[str, Any]:
        self.contexts.append(context)
        return {}


async def test_the_idempotency_key_is_lifted_out_of_the_arguments_and_groups_retries() -> None:
    w = world()
    async with w.client() as client:
        first = await client.call_tool("invoice_cancel", {**SMALL, "idempotency_key": "k-1"})
        retry = await client.call_tool("invoice_cancel", {**SMALL, "idempotency_key": "k-1"})
    assert first.structured_content is not None and retry.structured_content is not None
    assert retry.structured_content["duplicate_of"] == first.structured_content["run_id"]
    assert retry.structured_content["code"] == Code.SUCCEEDED
    assert w.recorder.count == 1
    assert "idempotency_key" not in w.recorder.calls[0].input


async def test_a_missing_required_key_is_refused_with_idempotency_key_required() -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool("invoice_cancel", SMALL)
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.IDEMPOTENCY_KEY_REQUIRED
    assert w.recorder.count == 0


@pytest.mark.parametrize("key", [42, "", "tab\there", "x" * 256])
async def test_an_unusable_key_is_refused_with_idempotency_key_invalid(key: Any) -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool("invoice_cancel", {**SMALL, "idempotency_key": key})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.IDEMPOTENCY_KEY_INVALID
    assert w.recorder.count == 0


async def test_an_unknown_tool_gets_a_run_with_action_not_registered() -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool("invoice.delete_everything", {})
    assert result.is_error is True
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_NOT_REGISTERED
    assert await w.audit(result.structured_content["run_id"])


async def test_no_tool_lets_an_agent_approve_reject_or_edit_policy() -> None:
    w = world()
    async with w.client(roles="billing,billing-lead,approver") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("signoff.approve", {"run_id": "x"})
    assert not any(
        word in name for name in names for word in ("approve", "reject", "decide", "policy")
    )
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_NOT_REGISTERED


async def test_a_call_outside_the_callers_roles_is_denied_by_the_pipeline() -> None:
    w = world()
    async with w.client(roles="support") as client:
        result = await client.call_tool("invoice_cancel", {**SMALL, "idempotency_key": "k-1"})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.POLICY_DENIED
    assert w.recorder.count == 0


async def test_a_write_needing_approval_waits_and_get_run_returns_once_it_is_decided() -> None:
    w = world()
    async with w.client() as client:
        pending = await client.call_tool("invoice_cancel", {**LARGE, "idempotency_key": "k-9"})
        outcome = pending.structured_content
        assert outcome is not None
        assert outcome["status"] == ExecutionStatus.PENDING_APPROVAL
        assert outcome["code"] == Code.APPROVAL_REQUIRED
        assert outcome["approval"]["approver_roles"] == ["billing-lead"]
        run_id = outcome["run_id"]

        poll = asyncio.create_task(
            client.call_tool("signoff_get_run", {"run_id": run_id, "wait_seconds": DEADLINE})
        )
        decision = await w.runtime.decide(
            run_id, "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE)
        )
        assert decision.accepted
        woken = await asyncio.wait_for(poll, DEADLINE)
        final = await until_final(client, run_id)
    # The long poll answers at the first change (RUNNING or already SUCCEEDED), not at a deadline.
    assert woken.structured_content is not None
    assert woken.structured_content["status"] in {"ACCEPTED", "SUCCEEDED"}
    assert final["status"] == ExecutionStatus.SUCCEEDED
    assert w.recorder.count == 1


async def test_get_run_without_wait_answers_at_once_with_the_current_state() -> None:
    w = world()
    async with w.client() as client:
        pending = await client.call_tool("invoice_cancel", {**LARGE, "idempotency_key": "k-9"})
        assert pending.structured_content is not None
        now = await client.call_tool(
            "signoff_get_run", {"run_id": pending.structured_content["run_id"], "wait_seconds": 0}
        )
    assert now.structured_content is not None
    assert now.structured_content["status"] == ExecutionStatus.PENDING_APPROVAL


async def test_another_tenants_run_answers_exactly_like_a_missing_one() -> None:
    w = world()
    async with w.client(tenant="acme") as acme, w.client(tenant="globex") as globex:
        pending = await acme.call_tool("invoice_cancel", {**LARGE, "idempotency_key": "k-1"})
        assert pending.structured_content is not None
        theirs = pending.structured_content["run_id"]
        missing = "01900000-0000-7000-8000-000000000000"

        answers: dict[str, list[dict[str, Any]]] = {}
        for run_id in (theirs, missing):
            got = await globex.call_tool("signoff_get_run", {"run_id": run_id})
            waited = await globex.call_tool(
                "signoff_get_run", {"run_id": run_id, "wait_seconds": 1}
            )
            cancelled = await globex.call_tool("signoff_cancel_run", {"run_id": run_id})
            answers[run_id] = [
                _without_run_id(r.structured_content) for r in (got, waited, cancelled)
            ]
            assert all(r.is_error for r in (got, waited, cancelled))
        listed = await globex.call_tool("signoff_list_runs", {})

        errors: list[int] = []
        for run_id in (theirs, missing):
            with pytest.raises(MCPError) as raised:
                await globex.read_resource(f"signoff://runs/{run_id}")
            errors.append(raised.value.code)
        still = await acme.call_tool("signoff_get_run", {"run_id": theirs})

    assert answers[theirs] == answers[missing]
    assert answers[theirs][0]["code"] == Code.ACTION_RUN_NOT_FOUND
    assert listed.structured_content is not None and listed.structured_content["runs"] == []
    assert errors[0] == errors[1] == types.INVALID_PARAMS
    assert still.structured_content is not None
    assert still.structured_content["status"] == ExecutionStatus.PENDING_APPROVAL


def _without_run_id(content: Any) -> dict[str, Any]:
    assert isinstance(content, dict)
    return {k: v for k, v in content.items() if k != "run_id"}


async def test_cancel_run_cancels_a_run_waiting_for_approval() -> None:
    w = world()
    async with w.client() as client:
        pending = await client.call_tool("invoice_cancel", {**LARGE, "idempotency_key": "k-1"})
        assert pending.structured_content is not None
        run_id = pending.structured_content["run_id"]
        cancelled = await client.call_tool("signoff_cancel_run", {"run_id": run_id})
        again = await client.call_tool("signoff_cancel_run", {"run_id": run_id})
    assert cancelled.structured_content is not None and again.structured_content is not None
    assert cancelled.structured_content["status"] == ExecutionStatus.CANCELLED
    assert cancelled.structured_content["code"] == Code.ACTION_CANCELLED
    assert again.structured_content["code"] == Code.ACTION_RUN_ALREADY_TERMINAL
    assert w.recorder.count == 0


async def test_list_runs_shows_the_tenants_runs_newest_first_filtered_and_paged() -> None:
    w = world()
    async with w.client() as client:
        ran = []
        for index in range(5):
            args = {**SMALL, "invoice_id": f"INV-{index}", "idempotency_key": f"k-{index}"}
            ran.append(await client.call_tool("invoice_cancel", args))
        waiting = await client.call_tool("invoice_cancel", {**LARGE, "idempotency_key": "k-w"})
        first = await client.call_tool("signoff_list_runs", {"limit": 4})
        assert first.structured_content is not None
        rest = await client.call_tool(
            "signoff_list_runs", {"limit": 4, "before": first.structured_content["next_before"]}
        )
        pending = await client.call_tool("signoff_list_runs", {"status": "PENDING_APPROVAL"})
        succeeded = await client.call_tool("signoff_list_runs", {"status": "SUCCEEDED", "limit": 2})
        tool = tool_named((await client.list_tools()).tools, "signoff_list_runs")
    for result in (first, rest, pending, succeeded):
        check_output(tool, result)
    ids = [r.structured_content["run_id"] for r in (*ran, waiting) if r.structured_content]
    page1 = [o["run_id"] for o in first.structured_content["runs"]]
    assert rest.structured_content is not None
    page2 = [o["run_id"] for o in rest.structured_content["runs"]]
    assert page1 + page2 == list(reversed(ids))
    assert rest.structured_content["next_before"] is None
    assert pending.structured_content is not None and succeeded.structured_content is not None
    assert [o["run_id"] for o in pending.structured_content["runs"]] == [ids[-1]]
    assert [o["status"] for o in succeeded.structured_content["runs"]] == ["SUCCEEDED"] * 2


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("signoff_get_run", {}),
        ("signoff_get_run", {"run_id": "x", "wait_seconds": 31}),
        ("signoff_get_run", {"run_id": "x", "wait_seconds": "soon"}),
        ("signoff_cancel_run", {"run_id": 7}),
        ("signoff_list_runs", {"status": "SOMETHING"}),
        ("signoff_list_runs", {"limit": 0}),
        ("signoff_list_runs", {"who": "me"}),
    ],
)
async def test_built_in_tools_refuse_unusable_arguments_with_input_validation_failed(
    tool: str, arguments: dict[str, Any]
) -> None:
    w = world()
    async with w.client() as client:
        listed = (await client.list_tools()).tools
        result = await client.call_tool(tool, arguments)
    content = check_output(tool_named(listed, tool), result)
    assert result.is_error is True
    assert content["code"] == Code.INPUT_VALIDATION_FAILED


async def test_every_outcome_validates_against_the_advertised_output_schema() -> None:
    w = world()
    async with w.client() as client:
        listed = (await client.list_tools()).tools
        calls: list[tuple[str, dict[str, Any]]] = [
            ("invoice_cancel", {**SMALL, "idempotency_key": "a"}),
            ("invoice_cancel", {**SMALL, "idempotency_key": "a"}),
            ("invoice_cancel", {**SMALL, "amount": 11, "idempotency_key": "a"}),
            ("invoice_cancel", {**LARGE, "idempotency_key": "b"}),
            ("invoice_cancel", {**LARGE, "idempotency_key": "b"}),
            ("invoice_cancel", {**LARGE, "amount": 200000, "idempotency_key": "c"}),
            ("invoice_cancel", {"invoice_id": 1, "idempotency_key": "d"}),
            ("invoice_get", {"invoice_id": "INV-1"}),
            ("signoff_list_runs", {}),
            ("signoff_get_run", {"run_id": "missing"}),
            ("signoff_cancel_run", {"run_id": "missing"}),
        ]
        codes = set()
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            content = check_output(tool_named(listed, name), result)
            codes.add(content.get("code"))
            for outcome in content.get("runs", []):
                jsonschema_rs.validate(
                    tool_named(listed, "signoff_get_run").output_schema or {}, outcome
                )
    assert {
        Code.SUCCEEDED,
        Code.IDEMPOTENCY_KEY_REUSED,
        Code.APPROVAL_REQUIRED,
        Code.DUPLICATE_IN_PROGRESS,
        "AMOUNT_OVER_LIMIT",
        Code.INPUT_VALIDATION_FAILED,
        Code.ACTION_RUN_NOT_FOUND,
    } <= codes


async def test_the_run_resource_template_reads_a_run_of_the_callers_tenant() -> None:
    w = world()
    async with w.client() as client:
        templates = await client.list_resource_templates()
        done = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
        assert done.structured_content is not None
        uri = f"signoff://runs/{done.structured_content['run_id']}"
        read = await client.read_resource(uri)
        resources = await client.list_resources()
    assert [t.uri_template for t in templates.resource_templates] == ["signoff://runs/{run_id}"]
    block = read.contents[0]
    assert isinstance(block, types.TextResourceContents)
    assert block.mime_type == "application/json"
    assert '"code":"SUCCEEDED"' in block.text
    assert [r.uri for r in resources.resources] == [uri]


async def test_a_client_that_disconnects_mid_call_leaves_a_consistent_run() -> None:
    gate = Gate()
    w = world(lookup_definition(gate, id="slow.read"))
    async with w.client() as client:
        call = asyncio.create_task(client.call_tool("slow_read", {"invoice_id": "INV-1"}))
        await gate.wait_started()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    gate.release.set()
    async with w.client() as again:
        listed = await again.call_tool("signoff_list_runs", {"limit": 1})
        assert listed.structured_content is not None
        run_id = listed.structured_content["runs"][0]["run_id"]
        final = await until_final(again, run_id)
    assert final["status"] == ExecutionStatus.SUCCEEDED
    assert final["output"] == {"released": True}
    async with w.store.unit() as unit:
        run = await unit.runs.get(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    kinds = [e.kind for e in await w.audit(run_id)]
    assert kinds == ["proposed", "resolved", "policy_allowed", "dispatching", "executed"]
    assert len(gate.calls) == 1


async def test_a_reload_tells_listening_clients_that_the_tools_changed() -> None:
    w = world()
    surface = w.surface()
    from mcp import Client

    async with Client(surface.server) as client, client.listen(tools_list_changed=True) as sub:
        before = {t.name for t in (await client.list_tools()).tools}
        w.registry.register(lookup_definition(lambda c: {}, id="invoice.archive"))
        await surface.notify_tools_changed()
        event = await asyncio.wait_for(anext(aiter(sub)), DEADLINE)
        after = {t.name for t in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert after - before == {"invoice_archive"}


async def test_a_reload_notifies_handshake_era_sessions_too() -> None:
    w = world()
    surface = w.surface()
    received = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            received.set()

    from mcp import Client

    async with Client(surface.server, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        await client.list_tools()
        await surface.notify_tools_changed()
        await asyncio.wait_for(received.wait(), DEADLINE)


@pytest.mark.parametrize(
    "document",
    [
        {
            "run_id": "r",
            "action": "a",
            "status": "SUCCEEDED",
            "code": "SUCCEEDED",
            "retry": "NEVER",
        },
        {"run_id": "r", "action": "a", "status": "DONE", "code": "X", "retry": "NEVER"},
        {"run_id": "r", "action": "a", "status": "FAILED", "code": "X", "retry": "NEVER", "x": 1},
        {"run_id": "r", "action": "a", "status": "FAILED", "code": "X", "retry": "SOMETIME"},
        {"run_id": "r", "status": "FAILED", "code": "X", "retry": "NEVER"},
        {
            "run_id": "r",
            "action": "a",
            "status": "PENDING_APPROVAL",
            "code": "APPROVAL_REQUIRED",
            "retry": "AFTER_APPROVAL",
            "approval": {"approval_id": "p", "expires_at": None, "approvals_needed": 1},
            "output": None,
            "duplicate_of": None,
        },
        {
            "run_id": "r",
            "action": "a",
            "status": "FAILED",
            "code": "X",
            "retry": "NEVER",
            "approval": {"approval_id": "p"},
        },
        {
            "run_id": "r",
            "action": "a",
            "status": "FAILED",
            "code": "X",
            "retry": "NEVER",
            "output": [],
        },
    ],
)
def test_the_advertised_output_schema_accepts_exactly_what_the_model_accepts(
    document: dict[str, Any],
) -> None:
    from pydantic import ValidationError

    from signoff.core.results import ActionOutcome
    from signoff.surfaces.mcp.schemas import outcome_schema

    schema = outcome_schema()
    assert "$ref" not in json.dumps(schema)
    try:
        ActionOutcome.model_validate(document)
        model_accepts = True
    except ValidationError:
        model_accepts = False
    assert jsonschema_rs.Draft202012Validator(schema).is_valid(document) is model_accepts


async def test_an_action_named_like_a_built_in_tool_is_shadowed_by_the_built_in() -> None:
    w = world(lookup_definition(lambda c: {"hijacked": True}, id="signoff.get_run"))
    async with w.client() as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("signoff_get_run", {"run_id": "nope"})
    assert listed.count("signoff_get_run") == 1
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_RUN_NOT_FOUND
