"""Who may read a run, through the MCP surface (contract §5): get, wait, cancel, list, resources.

Another principal's run answers exactly like a run that does not exist; a shareable action's run
(idempotency scope ``tenant``) is visible to its tenant; a sensitive output field is masked on
every read and on the call's own result, while the store keeps the executor's real value.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from signoff import Code, ExecutionContext
from signoff.core.definition import IdempotencySpec
from signoff.core.visibility import MASK
from tests.helpers import NO_APPROVAL, Recorder, definition
from tests.surfaces.support import World, world

IBAN = "DE89370400440532013000"
SMALL = {"invoice_id": "INV-1", "amount": 10}
LARGE = {"invoice_id": "INV-2", "amount": 5000}
MISSING = "0190aaaa-0000-7000-8000-000000000000"


def payout(context: ExecutionContext) -> dict[str, Any]:
    return {"iban": IBAN, "bank": "Example Bank", "to": context.input["invoice_id"]}


@pytest.fixture
def w() -> World:
    return world(
        definition(
            Recorder(),
            id="report.build",
            idempotency=IdempotencySpec(key="optional", scope="tenant"),
            approval=NO_APPROVAL,
        ),
        definition(
            payout,
            id="payout.send",
            approval=NO_APPROVAL,
            sensitive_fields=("/output/iban",),
        ),
    )


def owner(w: World) -> Client:
    return w.client(principal="agent-1", roles="billing")


def neighbour(w: World) -> Client:
    # Same tenant, and even an approver's role: roles never widen what an agent reads.
    return w.client(principal="agent-2", roles="billing,billing-lead")


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def without_id(outcome: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in outcome.items() if key != "run_id"}


async def read_resource_error(client: Client, run_id: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as raised:
        await client.read_resource(f"signoff://runs/{run_id}")
    return raised.value.error.code, raised.value.error.message


async def test_another_principals_run_answers_exactly_like_a_missing_one_on_every_read(
    w: World,
) -> None:
    async with owner(w) as mine:
        pending = await call(mine, "invoice_cancel", {**LARGE, "idempotency_key": "k-1"})
        assert pending["code"] == Code.APPROVAL_REQUIRED
    run_id = pending["run_id"]
    async with neighbour(w) as other:
        for tool, extra in (
            ("signoff_get_run", {}),
            ("signoff_get_run", {"wait_seconds": 5}),
            ("signoff_cancel_run", {}),
        ):
            hidden = await call(other, tool, {"run_id": run_id, **extra})
            missing = await call(other, tool, {"run_id": MISSING, **extra})
            assert hidden["code"] == Code.ACTION_RUN_NOT_FOUND
            assert without_id(hidden) == without_id(missing)
        listed = await call(other, "signoff_list_runs", {})
        assert run_id not in {r["run_id"] for r in listed["runs"]}
        assert await read_resource_error(other, run_id) == await read_resource_error(other, MISSING)
    # Nothing was cancelled, and the owner still reads its run everywhere.
    async with owner(w) as mine:
        again = await call(mine, "signoff_get_run", {"run_id": run_id})
        assert again["code"] == Code.APPROVAL_REQUIRED
        listed = await call(mine, "signoff_list_runs", {})
        assert run_id in {r["run_id"] for r in listed["runs"]}
        await mine.read_resource(f"signoff://runs/{run_id}")


async def test_listing_pages_past_runs_the_caller_may_not_read(w: World) -> None:
    async with neighbour(w) as other:
        theirs = await call(other, "invoice_cancel", {**SMALL, "idempotency_key": "old"})
    async with owner(w) as mine:
        for index in range(30):
            await call(mine, "invoice_cancel", {**SMALL, "idempotency_key": f"k-{index}"})
    async with neighbour(w) as other:
        listed = await call(other, "signoff_list_runs", {"limit": 5})
    # Thirty newer runs of another principal do not hide the caller's own older run.
    assert [r["run_id"] for r in listed["runs"]] == [theirs["run_id"]]


async def test_a_shareable_actions_run_is_visible_to_its_tenant_and_no_further(w: World) -> None:
    async with owner(w) as mine:
        shared = await call(mine, "report_build", {**SMALL, "idempotency_key": "r-1"})
    assert shared["code"] == Code.SUCCEEDED
    async with neighbour(w) as other:
        seen = await call(other, "signoff_get_run", {"run_id": shared["run_id"]})
        assert seen["code"] == Code.SUCCEEDED
        assert shared["run_id"] in {
            r["run_id"] for r in (await call(other, "signoff_list_runs", {}))["runs"]
        }
    async with w.client(principal="agent-9", tenant="globex") as stranger:
        assert (await call(stranger, "signoff_get_run", {"run_id": shared["run_id"]}))[
            "code"
        ] == Code.ACTION_RUN_NOT_FOUND


async def test_a_sensitive_output_field_is_masked_on_every_read_but_stored_as_returned(
    w: World,
) -> None:
    async with owner(w) as mine:
        paid = await call(mine, "payout_send", {**SMALL, "idempotency_key": "p-1"})
        run_id = paid["run_id"]
        got = await call(mine, "signoff_get_run", {"run_id": run_id})
        listed = await call(mine, "signoff_list_runs", {})
        resource = await mine.read_resource(f"signoff://runs/{run_id}")
        replay = await call(mine, "payout_send", {**SMALL, "idempotency_key": "p-1"})
    from_list = next(r for r in listed["runs"] if r["run_id"] == run_id)
    for outcome in (paid, got, from_list, replay):
        assert outcome["output"] == {"iban": MASK, "bank": "Example Bank", "to": "INV-1"}
    text = resource.contents[0]
    assert IBAN not in getattr(text, "text", "")
    stored = await w.runtime.get_run(run_id, "acme")
    assert stored is not None and stored.result is not None
    assert stored.result.output is not None and stored.result.output["iban"] == IBAN
