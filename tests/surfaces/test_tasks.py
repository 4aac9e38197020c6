"""The MCP tasks extension over durable runs, driven by raw JSON-RPC over streamable HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from signoff import Code, ExecutionStatus
from signoff.core.clock import ManualClock
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.mcp.tasks import EXTENSION, TaskIds, task_secret_from_env
from tests.helpers import LEAD, Recorder, definition
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import lookup_definition, running

SECRET = b"a-task-secret-for-the-tests"
TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}}
LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}
SMALL = {"invoice_id": "INV-1", "amount": 10, "idempotency_key": "k-1"}
DAY_MS = 24 * 3600 * 1000


def runtime(store: Store | None = None, clock: ManualClock | None = None) -> Runtime:
    registry = ActionRegistry([definition(Recorder()), lookup_definition(Recorder())])
    return Runtime(registry, store if store is not None else InMemoryStore(), clock=clock)


@asynccontextmanager
async def serving(
    rt: Runtime, *, tenant: str = "acme", secret: bytes = SECRET, tasks: bool = True
) -> AsyncIterator[RawClient]:
    """A loopback server acting as one agent, and a raw client that may declare the extension."""
    caller = make_caller("agent-1", tenant, "billing")
    app = build_http_app(rt, FixedIdentity(caller, "127.0.0.1"), HttpOptions(task_secret=secret))
    async with running(app) as url, httpx2.AsyncClient(timeout=30) as http:
        yield RawClient(http, url, capabilities=TASKS if tasks else {})


async def create_task(client: RawClient) -> dict[str, Any]:
    reply = await client.call("tools/call", {"name": "invoice_cancel", "arguments": LARGE})
    created: dict[str, Any] = reply["result"]
    assert created["resultType"] == "task", reply
    return created


async def get_task(client: RawClient, task_id: str) -> dict[str, Any]:
    reply = await client.call("tasks/get", {"taskId": task_id})
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def approve(rt: Runtime, task_id: str) -> None:
    run_id = task_id.rpartition(".")[0]
    decided = await rt.decide(
        run_id, "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE)
    )
    assert decided.accepted


async def test_an_approval_task_is_working_until_approved_then_completed_with_the_outcome() -> None:
    rt = runtime()
    async with serving(rt) as client:
        created = await create_task(client)
        waiting = await get_task(client, created["taskId"])
        await approve(rt, created["taskId"])
        done = await get_task(client, created["taskId"])

    assert (created["status"], waiting["status"]) == ("working", "working")
    assert created["ttlMs"] == DAY_MS and created["pollIntervalMs"] > 0
    assert waiting["resultType"] == "complete" and "result" not in waiting
    assert done["status"] == "completed" and done["ttlMs"] is None
    outcome = done["result"]["structuredContent"]
    assert (outcome["status"], outcome["code"]) == (ExecutionStatus.SUCCEEDED, Code.SUCCEEDED)
    assert outcome["run_id"] == created["taskId"].rpartition(".")[0]
    assert done["result"]["isError"] is False


async def test_a_client_that_does_not_declare_the_extension_gets_the_plain_outcome() -> None:
    async with serving(runtime(), tasks=False) as client:
        reply = await client.call("tools/call", {"name": "invoice_cancel", "arguments": LARGE})
    result = reply["result"]
    assert result.get("resultType") != "task" and "taskId" not in result
    assert result["structuredContent"]["status"] == ExecutionStatus.PENDING_APPROVAL


async def test_a_call_that_finishes_at_once_is_a_plain_result_even_when_tasks_are_declared() -> (
    None
):
    async with serving(runtime()) as client:
        reply = await client.call("tools/call", {"name": "invoice_cancel", "arguments": SMALL})
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["structuredContent"]["code"] == Code.SUCCEEDED


async def test_tasks_cancel_is_the_governed_cancel_and_the_task_reads_cancelled() -> None:
    rt = runtime()
    async with serving(rt) as client:
        created = await create_task(client)
        ack = await client.call("tasks/cancel", {"taskId": created["taskId"]})
        after = await get_task(client, created["taskId"])
    assert ack["result"]["resultType"] == "complete" and set(ack["result"]) <= {
        "resultType",
        "_meta",
    }
    assert after["status"] == "cancelled"
    run = await rt.get_run(created["taskId"].rpartition(".")[0], "acme")
    assert run is not None and run.status == "CANCELLED"


async def test_an_approval_nobody_decides_completes_the_task_as_expired() -> None:
    clock = ManualClock()
    rt = runtime(clock=clock)
    async with serving(rt) as client:
        created = await create_task(client)
        clock.advance(timedelta(hours=25))
        expired = await get_task(client, created["taskId"])
    assert expired["status"] == "completed"
    assert expired["result"]["isError"] is True
    assert expired["result"]["structuredContent"]["code"] == Code.APPROVAL_EXPIRED


async def test_a_task_survives_a_server_restart(tmp_path: Path) -> None:
    from signoff.store.factory import open_store

    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    first = await open_store(url)
    try:
        async with serving(runtime(first)) as client:
            created = await create_task(client)
    finally:
        await first.close()
    second = await open_store(url)
    try:
        rt = runtime(second)
        async with serving(rt) as client:
            waiting = await get_task(client, created["taskId"])
            await approve(rt, created["taskId"])
            done = await get_task(client, created["taskId"])
    finally:
        await second.close()
    assert waiting["status"] == "working"
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["code"] == Code.SUCCEEDED


@pytest.mark.parametrize(
    "forge",
    [
        lambda task_id: task_id.rpartition(".")[0],  # the bare run id
        lambda task_id: task_id[:-1] + ("A" if task_id[-1] != "A" else "B"),  # one character off
        lambda task_id: TaskIds(b"somebody-elses-secret").issue("acme", task_id.split(".")[0]),
        lambda task_id: "nonsense",
    ],
)
async def test_a_guessed_or_forged_task_id_reads_exactly_like_a_missing_task(forge: Any) -> None:
    async with serving(runtime()) as client:
        created = await create_task(client)
        replies = [
            await client.call(method, {"taskId": forge(created["taskId"])})
            for method in ("tasks/get", "tasks/cancel")
        ]
    assert [reply["error"]["code"] for reply in replies] == [types.INVALID_PARAMS] * 2


async def test_another_tenant_cannot_read_or_cancel_the_task() -> None:
    rt = runtime()
    async with serving(rt) as acme, serving(rt, tenant="globex") as globex:
        created = await create_task(acme)
        read = await globex.call("tasks/get", {"taskId": created["taskId"]})
        cancel = await globex.call("tasks/cancel", {"taskId": created["taskId"]})
        still = await get_task(acme, created["taskId"])
    assert read["error"]["code"] == cancel["error"]["code"] == types.INVALID_PARAMS
    assert still["status"] == "working"


async def test_the_mcp_name_header_must_carry_the_task_id() -> None:
    async with serving(runtime()) as client:
        created = await create_task(client)
        wrong = await client.call("tasks/get", {"taskId": created["taskId"]}, name="other")
    assert wrong["error"]["code"] == types.HEADER_MISMATCH


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
async def test_tasks_result_and_tasks_list_are_not_methods(method: str) -> None:
    async with serving(runtime()) as client:
        reply = await client.call(method, {})
    assert reply["error"]["code"] == types.METHOD_NOT_FOUND


async def test_server_discover_advertises_the_tasks_extension() -> None:
    async with serving(runtime()) as client:
        reply = await client.call("server/discover", {})
    assert EXTENSION in reply["result"]["capabilities"]["extensions"]


def test_the_task_secret_comes_from_its_setting_else_from_the_token_secret() -> None:
    assert task_secret_from_env({"SIGNOFF_TASK_SECRET": "s" * 20}, "jwt") == b"s" * 20
    assert task_secret_from_env({}, "j" * 32) == b"j" * 32
    assert task_secret_from_env({}) is None
    with pytest.raises(ValueError, match="SIGNOFF_TASK_SECRET"):
        task_secret_from_env({"SIGNOFF_TASK_SECRET": "short"})


def test_a_run_signoff_itself_failed_is_a_failed_task_with_a_json_rpc_error() -> None:
    from signoff.core.codes import RetryDisposition
    from signoff.core.results import ActionOutcome
    from signoff.surfaces.mcp.tasks import task_state
    from tests.helpers import bare_run

    outcome = ActionOutcome(
        run_id="r-1",
        action="invoice.cancel",
        status=ExecutionStatus.FAILED,
        code=Code.ACTION_RUNTIME_FAILED,
        retry=RetryDisposition.MANUAL_REVIEW,
        message="signoff could not finish recording this request.",
    )
    result = {"content": [], "structuredContent": outcome.model_dump(mode="json"), "isError": True}
    state = task_state("r-1.mac", outcome, bare_run("RUNTIME_FAILED"), result)
    assert state["status"] == "failed" and "result" not in state
    assert state["error"]["code"] == types.INTERNAL_ERROR
    assert state["error"]["data"]["code"] == Code.ACTION_RUNTIME_FAILED


async def test_background_work_is_a_working_task_until_the_executor_finishes() -> None:
    from signoff.core.definition import ExecutorMode
    from signoff.surfaces.mcp.tasks import WORK_POLL_MS
    from tests.helpers import NO_APPROVAL
    from tests.surfaces.support import DEADLINE, Gate

    def _missing() -> Any:
        raise AssertionError("the run disappeared")

    gate = Gate()
    background = lookup_definition(gate, id="invoice.remind", mode=ExecutorMode.ASYNC)
    rt = Runtime(ActionRegistry([definition(Recorder()), background]), InMemoryStore())
    assert background.approval == NO_APPROVAL
    async with serving(rt) as client:
        reply = await client.call(
            "tools/call", {"name": "invoice_remind", "arguments": {"invoice_id": "INV-1"}}
        )
        created = reply["result"]
        await gate.wait_started()
        working = await get_task(client, created["taskId"])
        gate.release.set()
        run_id = created["taskId"].rpartition(".")[0]
        async with asyncio.timeout(DEADLINE):
            while not (await rt.wait(run_id, "acme", DEADLINE) or _missing()).status.is_final:
                pass
        done = await get_task(client, created["taskId"])
    assert (created["resultType"], created["status"]) == ("task", "working")
    assert (working["status"], working["pollIntervalMs"]) == ("working", WORK_POLL_MS)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["output"] == {"released": True}
