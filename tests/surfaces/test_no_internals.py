"""Nothing internal reaches an agent (contract §4): a code and a plain message; detail goes to the
run's audit trail for operators, with credentials redacted.

Every test plants a secret where an internal error would carry it and proves the agent's answer
(structured content and text) never contains it, nor the URL, SQL or exception class around it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from signoff import Code
from signoff.core.definition import DenyRule, PolicySpec
from signoff.core.ports import StoreUnit
from signoff.executors.http.executor import HttpExecutor
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp import tools
from tests.helpers import NO_APPROVAL, definition
from tests.surfaces.support import world

DB_SECRET = "S3cr3t-erp-pw"
SQL_TEXT = (
    "(sqlalchemy.dialects.postgresql.asyncpg.Error) invalid byte sequence for encoding UTF8: "
    f"0x00 [SQL: SELECT signoff_runs.data FROM signoff_runs WHERE run_id = $1] "
    f"[parameters: ('postgresql://erp_user:{DB_SECRET}@db/erp',)]"
)
FORBIDDEN = (DB_SECRET, "postgresql://", "SELECT", "[SQL", "Traceback", "RuntimeError", "KeyError")


def leaks(answer: Any) -> list[str]:
    text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
    return [word for word in FORBIDDEN if word in text]


def result_text(result: types.CallToolResult) -> str:
    return json.dumps([result.structured_content, [getattr(c, "text", "") for c in result.content]])


class FaultyStore(InMemoryStore):
    """An in-memory store that fails like a database would once ``failing`` is set."""

    failing = False

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[StoreUnit]:
        if self.failing:
            raise RuntimeError(SQL_TEXT)
        async with super().unit() as unit:
            yield unit


async def _details(w: Any, run_id: str) -> list[str]:
    return [
        str(e.data.get("detail")) for e in await w.audit(run_id) if e.data and "detail" in e.data
    ]


async def test_an_executor_exception_reaches_the_agent_as_a_code_and_the_audit_trail_redacted() -> (
    None
):
    def explode(_context: Any) -> dict[str, Any]:
        raise RuntimeError(f"connect to postgresql://erp_user:{DB_SECRET}@db:5432/erp failed")

    w = world(definition(explode, id="erp.post", approval=NO_APPROVAL))
    async with w.client() as client:
        result = await client.call_tool(
            "erp_post", {"invoice_id": "INV-1", "amount": 1, "idempotency_key": "k1"}
        )
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_EXECUTION_EXCEPTION
    assert leaks(result_text(result)) == []
    details = await _details(w, result.structured_content["run_id"])
    assert details and "postgresql://***@db:5432/erp" in details[0]
    assert DB_SECRET not in details[0]


async def test_an_unreachable_http_executor_never_shows_its_url_or_credentials() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    url = f"http://svc_user:hunter2@127.0.0.1:{port}/pay?api_key=hunter2&x=1"
    w = world(definition(HttpExecutor(url=url), id="pay.send", approval=NO_APPROVAL))
    async with w.client() as client:
        result = await client.call_tool(
            "pay_send", {"invoice_id": "INV-1", "amount": 1, "idempotency_key": "k1"}
        )
    assert result.structured_content is not None
    assert result.structured_content["code"] == "HTTP_UNREACHABLE"
    text = result_text(result)
    assert "hunter2" not in text and "svc_user" not in text and str(port) not in text
    details = await _details(w, result.structured_content["run_id"])
    assert details and "hunter2" not in details[0]
    assert "***@127.0.0.1" in details[0]


async def test_a_policy_evaluation_error_names_the_rule_but_not_the_library_text() -> None:
    rule = DenyRule(when="input.missing_field > 1", code="NEVER")
    w = world(
        definition(
            lambda c: {}, id="inv.odd", approval=NO_APPROVAL, policy=PolicySpec(deny=(rule,))
        )
    )
    async with w.client() as client:
        result = await client.call_tool(
            "inv_odd", {"invoice_id": "INV-1", "amount": 1, "idempotency_key": "k1"}
        )
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.POLICY_EVALUATION_ERROR
    message = result.structured_content["message"]
    assert "policy.deny[0]" in message
    assert "missing_field" not in message and leaks(result_text(result)) == []
    details = await _details(w, result.structured_content["run_id"])
    assert details and "KeyError" in details[0]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (tools.GET_RUN, {"run_id": "0193c1c2-0000-7000-8000-000000000000"}),
        (tools.CANCEL_RUN, {"run_id": "0193c1c2-0000-7000-8000-000000000000"}),
        (tools.LIST_RUNS, {}),
    ],
)
async def test_a_store_fault_in_a_builtin_tool_answers_runtime_failed_without_sql(
    tool: str, arguments: dict[str, Any]
) -> None:
    store = FaultyStore()
    w = world(store=store)
    async with w.client() as client:
        store.failing = True
        result = await client.call_tool(tool, arguments)
        store.failing = False
        # The server still answers afterwards.
        assert (await client.call_tool(tools.LIST_RUNS, {})).is_error is False
    assert result.is_error is True
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_RUNTIME_FAILED
    assert leaks(result_text(result)) == []


async def test_a_store_fault_in_resources_is_a_json_rpc_error_without_sql() -> None:
    store = FaultyStore()
    w = world(store=store)
    async with w.client() as client:
        store.failing = True
        with pytest.raises(MCPError) as listing:
            await client.list_resources()
        with pytest.raises(MCPError) as reading:
            await client.read_resource("signoff://runs/0193c1c2-0000-7000-8000-000000000000")
        store.failing = False
    for raised in (listing.value, reading.value):
        assert raised.error.code == types.INTERNAL_ERROR
        assert Code.ACTION_RUNTIME_FAILED in raised.error.message
        assert leaks(raised.error.message) == [] and leaks(raised.error.data) == []


@pytest.mark.parametrize("name", ["invoice\x00cancel", "invoice_\ud800cancel", "\udfff"])
async def test_a_nul_or_lone_surrogate_in_a_tool_name_is_recorded_and_refused(name: str) -> None:
    # The SDK client cannot even send a lone surrogate (it goes into a header), so the surface
    # is called the way its tool handler calls it.
    w = world()
    caller = make_caller("agent-1", "acme", "billing")
    outcome = await w.surface().propose(caller, name, {"invoice_id": "INV-1", "amount": 1})
    assert outcome.code in (Code.INPUT_VALIDATION_FAILED, Code.ACTION_NOT_REGISTERED)
    assert await w.audit(outcome.run_id)
    outcome.model_dump_json().encode("utf-8")
