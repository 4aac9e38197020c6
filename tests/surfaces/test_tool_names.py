"""Tool names every MCP host accepts: ``invoice.cancel`` is the tool ``invoice_cancel`` (contract §7)."""

from __future__ import annotations

import re

import httpx2
import pytest

from signoff import Code
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.manifest import load_manifest_dir
from signoff.store.memory import InMemoryStore
from signoff.surfaces.mcp import SignoffMCP, fixed_identity, make_caller
from signoff.surfaces.mcp.http import FixedIdentity, build_http_app
from signoff.surfaces.mcp.tools import ACTION_META_KEY
from tests.helpers import definition
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import check_output, lookup_definition, running, tool_named, world

PORTABLE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MANIFESTS = DEMO_MANIFESTS
EVERY_ROLE = "billing,billing-lead,auditor"


def demo_surface() -> SignoffMCP:
    runtime = Runtime(ActionRegistry(load_manifest_dir(MANIFESTS)), InMemoryStore())
    return SignoffMCP(runtime, fixed_identity(make_caller("agent-1", "acme", EVERY_ROLE)))


async def test_every_tool_of_the_demo_has_a_name_claude_desktop_accepts() -> None:
    from mcp import Client

    async with Client(demo_surface().server) as client:
        listed = (await client.list_tools()).tools
    names = [tool.name for tool in listed]
    assert {"invoice_cancel", "invoice_send_reminder", "invoice_list", "invoice_get"} <= set(names)
    assert {"signoff_get_run", "signoff_cancel_run", "signoff_list_runs"} <= set(names)
    assert [name for name in names if not PORTABLE.fullmatch(name)] == []


async def test_every_tool_name_is_portable_over_raw_json_rpc_too() -> None:
    app = build_http_app(
        demo_surface().runtime,
        FixedIdentity(make_caller("agent-1", "acme", EVERY_ROLE), "127.0.0.1"),
    )
    async with running(app) as url, httpx2.AsyncClient() as http:
        reply = await RawClient(http, url).call("tools/list")
    names = [tool["name"] for tool in reply["result"]["tools"]]
    assert "invoice_cancel" in names
    assert [name for name in names if not PORTABLE.fullmatch(name)] == []


async def test_an_action_tool_keeps_its_action_id_in_title_and_meta() -> None:
    from mcp import Client

    async with Client(demo_surface().server) as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_send_reminder")
    assert tool.meta == {ACTION_META_KEY: "invoice.send_reminder"}
    assert tool.title is not None and "invoice.send_reminder" in tool.title


async def test_a_call_by_the_portable_name_runs_the_action_and_reports_its_id() -> None:
    w = world()
    async with w.client() as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_get")
        result = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
    outcome = check_output(tool, result)
    assert (outcome["code"], outcome["action"]) == (Code.SUCCEEDED, "invoice.get")
    assert w.recorder.count == 1


async def test_the_built_in_tools_answer_under_their_portable_names() -> None:
    w = world()
    async with w.client() as client:
        result = await client.call_tool("signoff_get_run", {"run_id": "missing"})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.ACTION_RUN_NOT_FOUND


async def test_what_the_agent_reads_names_only_the_portable_tool_names() -> None:
    from mcp import Client

    surface = demo_surface()
    async with Client(surface.server) as client:
        listed = (await client.list_tools()).tools
    texts = [tool.description or "" for tool in listed] + [surface.server.instructions or ""]
    dotted = re.compile(r"signoff\.(get|cancel|list)_runs?")
    assert [text for text in texts if dotted.search(text)] == []
    assert any("signoff_get_run" in text for text in texts)


def test_two_actions_whose_ids_map_to_one_tool_name_are_refused_by_the_registry() -> None:
    with pytest.raises(ValueError, match="invoice_get"):
        ActionRegistry([lookup_definition(dict), lookup_definition(dict, id="invoice_get")])


def test_an_action_whose_id_has_no_dot_keeps_it_as_its_name() -> None:
    registry = ActionRegistry([definition(lambda c: {}, id="payroll_run")])
    action = registry.resolve_tool("payroll_run")
    assert action is not None and action.id == "payroll_run"


async def test_every_demo_input_schema_property_is_a_schema_not_a_stray_yaml_key() -> None:
    from mcp import Client

    async with Client(demo_surface().server) as client:
        listed = (await client.list_tools()).tools
    stray = [
        (tool.name, name)
        for tool in listed
        for name, schema in tool.input_schema.get("properties", {}).items()
        if not isinstance(schema, dict)
    ]
    assert stray == []
    amount = tool_named(listed, "invoice_cancel").input_schema["properties"]["amount"]
    assert amount["description"] == "The invoice amount in EUR, as on the invoice."


async def test_the_tool_list_is_private_uncached_and_in_a_deterministic_order() -> None:
    app = build_http_app(
        demo_surface().runtime,
        FixedIdentity(make_caller("agent-1", "acme", EVERY_ROLE), "127.0.0.1"),
    )
    async with running(app) as url, httpx2.AsyncClient() as http:
        client = RawClient(http, url)
        first, second = await client.call("tools/list"), await client.call("tools/list")
    listed = first["result"]
    # The list depends on the caller's roles and on reloads: never shared, never reused.
    assert (listed["cacheScope"], listed["ttlMs"]) == ("private", 0)
    names = [tool["name"] for tool in listed["tools"]]
    assert names == [tool["name"] for tool in second["result"]["tools"]]
    actions = [tool["_meta"]["signoff/action"] for tool in listed["tools"] if "_meta" in tool]
    assert actions == sorted(actions)
    assert names[len(actions) :] == ["signoff_get_run", "signoff_cancel_run", "signoff_list_runs"]


async def test_a_call_by_the_dotted_action_id_still_reaches_the_action_unlisted() -> None:
    w = world()
    async with w.client() as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("invoice.get", {"invoice_id": "INV-1"})
    assert "invoice.get" not in names
    assert result.structured_content is not None
    assert (result.structured_content["code"], result.structured_content["action"]) == (
        Code.SUCCEEDED,
        "invoice.get",
    )
