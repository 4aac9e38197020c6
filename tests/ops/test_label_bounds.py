"""No caller can grow the number of metric series: every label value is one of this server's own
names (registered actions and tools, catalog and declared codes, stages, statuses, methods, audit
kinds) or ``unknown``.

A warm-up round makes each ``unknown`` series exist; then thousands of distinct made-up tool
names, JSON-RPC methods, executor codes, callback reasons, stage names and CAS operations arrive,
and ``/metrics`` has exactly as many series as before.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from signoff import ExecutionContext, ExecutionResult
from signoff.core.definition import IdempotencySpec, PolicySpec, ResultMapping
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.observability import record_callback_refusal, record_cas_conflict
from signoff.observability.observer import OperationsObserver
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.ops import Health, ops_routes
from signoff.surfaces.ops.metrics import MetricsEndpoint
from tests.helpers import NO_APPROVAL, Recorder, definition
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import DEADLINE, lookup_definition, running

pytestmark = pytest.mark.slow

DISTINCT = 1000
CODE_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "maxLength": 128}},
    "required": ["code"],
}


def echo_code(context: ExecutionContext) -> ExecutionResult:
    """An open (programmatic) executor answering whatever code it is asked for."""
    return ExecutionResult.failure(context.input["code"], "It failed.")


@dataclass
class Served:
    client: RawClient
    observer: OperationsObserver
    url: str


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    store = InMemoryStore()
    echo = lookup_definition(
        echo_code,
        id="erp.answer",
        input_schema=CODE_SCHEMA,
        idempotency=IdempotencySpec(),
        policy=PolicySpec(roles=None),
        results={"ERP_DOWN": ResultMapping()},
    )
    registry = ActionRegistry([definition(Recorder(), approval=NO_APPROVAL), echo])
    observer = OperationsObserver()
    runtime = Runtime(registry, store, observer=observer)
    draining = Draining()
    health = Health(store, lambda: len(registry.all()), draining)
    scrape = MetricsEndpoint(store, lane=runtime.background_usage)
    options = HttpOptions(routes=ops_routes(health, scrape.route()), draining=draining)
    caller = make_caller("agent-1", "acme", "billing")
    app = build_http_app(runtime, FixedIdentity(caller, "127.0.0.1"), options)
    async with running(app) as url, httpx2.AsyncClient(timeout=DEADLINE) as http:
        yield Served(RawClient(http, url), observer, url)
    await runtime.drain()


async def _series(served: Served) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    text = (await served.client.http.get(served.url + "/metrics")).text
    return {
        (sample.name, frozenset(sample.labels.items()))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def _made_up(served: Served, count: int) -> None:
    """``count`` of each: tool names, methods, codes, callback reasons, stages, CAS operations."""
    client = served.client
    limit = asyncio.Semaphore(8)

    async def call(method: str, params: dict[str, Any]) -> None:
        async with limit:
            await client.call(method, params)

    calls = []
    for _ in range(count):
        made_up = uuid.uuid4().hex
        calls.append(call("tools/call", {"name": f"t_{made_up}", "arguments": {}}))
        calls.append(call(f"m/{made_up}", {}))
        calls.append(call("tools/call", {"name": "erp_answer", "arguments": {"code": made_up}}))
        record_callback_refusal(made_up)
        record_cas_conflict(made_up)
        with served.observer.stage(made_up, "r", "a"):
            pass
    await asyncio.gather(*calls)


async def test_thousands_of_made_up_names_and_codes_leave_the_series_count_unchanged(
    served: Served,
) -> None:
    await _made_up(served, 1)  # every "unknown" series exists now
    before = await _series(served)
    await _made_up(served, DISTINCT)
    after = await _series(served)
    assert len(after) == len(before), sorted(after - before)[:5]


async def test_a_declared_domain_code_and_a_registered_action_keep_their_names(
    served: Served,
) -> None:
    reply = await served.client.call(
        "tools/call", {"name": "erp_answer", "arguments": {"code": "ERP_DOWN"}}
    )
    assert reply["result"]["structuredContent"]["code"] == "ERP_DOWN"
    labels = [dict(labels) for _, labels in await _series(served)]
    assert {
        "action": "erp.answer",
        "status": "FAILED",
        "code": "ERP_DOWN",
        "retry": "MANUAL_REVIEW",
    } in labels
