"""Over stdio every request gets an answer: a JSON-RPC error or an outcome, never silence."""

from __future__ import annotations

import pytest

from signoff import Code
from signoff.surfaces.mcp import tools
from tests.surfaces.raw_stdio import RawStdio

pytestmark = pytest.mark.slow


def deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize("depth", [40, 200, 250, 5000])
async def test_a_deeply_nested_request_over_stdio_is_answered_and_the_server_goes_on(
    depth: int,
) -> None:
    async with RawStdio() as stdio:
        request_id = stdio.new_id()
        line = (
            f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":'
            f'{{"name":"invoice_get","arguments":{{"invoice_id":"INV-1","deep":{deep(depth)}}}}}}}'
        )
        answer = await stdio.raw_call(request_id, line)
        if "result" in answer:
            assert answer["result"]["structuredContent"]["code"] == Code.INPUT_VALIDATION_FAILED
        else:
            assert isinstance(answer["error"]["code"], int)
        after = await stdio.call("tools/call", {"name": tools.LIST_RUNS, "arguments": {}})
        assert after["result"]["structuredContent"]["code"] == Code.SUCCEEDED


async def test_a_line_that_is_not_json_gets_a_parse_error_when_its_id_can_be_read() -> None:
    async with RawStdio() as stdio:
        request_id = stdio.new_id()
        answer = await stdio.raw_call(
            request_id, f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/list",'
        )
        assert answer["error"]["code"] == -32700
        listed = await stdio.call("tools/list", {})
        assert tools.GET_RUN in {tool["name"] for tool in listed["result"]["tools"]}
