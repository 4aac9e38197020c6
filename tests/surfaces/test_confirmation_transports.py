"""Requester confirmation over the real transports: a stdio subprocess and streamable HTTP on
loopback, each with a real ``mcp.Client`` whose elicitation callback accepts or declines, on
both protocol eras."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from signoff import Code
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from tests.helpers import Recorder
from tests.surfaces.confirming import PAY, Human, confirm_definitions
from tests.surfaces.support import running

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"SIGNOFF_PRINCIPAL": "agent-1", "SIGNOFF_TENANT": "acme", "SIGNOFF_ROLES": "billing"}
pytestmark = pytest.mark.slow
ANSWERS: list[tuple[Literal["accept", "decline"], str]] = [
    ("accept", Code.SUCCEEDED),
    ("decline", Code.CONFIRMATION_DECLINED),
]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_host_confirms_or_declines(mode: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    paths = os.pathsep.join((str(ROOT / "src"), str(ROOT)))  # this checkout first
    env.update(IDENTITY, PYTHONPATH=paths, SIGNOFF_TEST_CONFIRM="1")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.surfaces.stdio_server"], env=env, cwd=str(ROOT)
    )
    for n, (action, code) in enumerate(ANSWERS):
        human = Human(action)
        async with Client(params, mode=mode, elicitation_callback=human) as client:
            result = await client.call_tool("invoice_pay", {**PAY, "idempotency_key": f"s{n}"})
        assert result.structured_content is not None
        assert result.structured_content["code"] == code
        assert len(human.shown) == 1


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_http_host_confirms_or_declines(mode: str) -> None:
    recorder = Recorder()
    runtime = Runtime(ActionRegistry(confirm_definitions(recorder)), InMemoryStore())
    caller = make_caller("agent-1", "acme", "billing")
    app = build_http_app(runtime, FixedIdentity(caller, "127.0.0.1"), HttpOptions())
    async with running(app) as url:
        for n, (action, code) in enumerate(ANSWERS):
            human = Human(action)
            async with Client(url + "/mcp", mode=mode, elicitation_callback=human) as client:
                result = await client.call_tool("invoice_pay", {**PAY, "idempotency_key": f"h{n}"})
            assert result.structured_content is not None
            assert result.structured_content["code"] == code
            assert len(human.shown) == 1
    assert recorder.count == 1
