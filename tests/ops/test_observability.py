"""What an operator sees of governed calls: one JSON log line per call and per decision, metrics
that move with the right labels, and spans under the MCP server span with the parent trace
taken from the request's ``_meta``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from opentelemetry import trace
from prometheus_client.parser import text_string_to_metric_families

from signoff import Code
from signoff.core.audit_events import AuditKind
from signoff.core.clock import SystemClock
from signoff.core.ledger import RunLedger
from signoff.core.registry import ActionRegistry
from signoff.core.results import ExecutionResult
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.observability.logs import configure_logging
from signoff.observability.metrics import METRICS
from signoff.observability.observer import OperationsObserver
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.ops import Health, ops_routes
from signoff.surfaces.ops.metrics import MetricsEndpoint
from tests.helpers import LEAD, Recorder, bare_run, definition
from tests.ops.spans import finished_spans
from tests.surfaces.support import http_client, lookup_definition, running

LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}
SECRET_INVOICE = "INV-98765432123"  # stands for anything an input may hold


@dataclass
class Served:
    runtime: Runtime
    url: str
    logs: io.StringIO


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])


@pytest.fixture
async def served(json_logs: io.StringIO) -> AsyncIterator[Served]:
    store = InMemoryStore()
    registry = ActionRegistry([definition(Recorder()), lookup_definition(Recorder())])
    runtime = Runtime(registry, store, observer=OperationsObserver())
    draining = Draining()
    health = Health(store, lambda: len(registry.all()), draining)
    scrape = MetricsEndpoint(store, lane=runtime.background_usage)
    options = HttpOptions(routes=ops_routes(health, scrape.route()), draining=draining)
    caller = make_caller("agent-1", "acme", "billing")
    app = build_http_app(runtime, FixedIdentity(caller, "127.0.0.1"), options)
    async with running(app) as url:
        yield Served(runtime, url, json_logs)
    await runtime.drain()


def _lines(stream: io.StringIO, logger: str) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [entry for entry in entries if entry["logger"] == logger]


async def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    async with httpx2.AsyncClient(timeout=10) as client:
        text = (await client.get(url + "/metrics")).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_one_json_line_per_governed_call_and_per_decision_with_their_facts(
    served: Served,
) -> None:
    async with http_client(served.url, None) as client:
        read = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
        pending = await client.call_tool("invoice_cancel", {**LARGE, "invoice_id": SECRET_INVOICE})
    assert read.structured_content is not None and pending.structured_content is not None
    run_id = pending.structured_content["run_id"]
    decided = await served.runtime.decide(
        run_id, "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE, reason="ok")
    )
    assert decided.accepted

    calls = _lines(served.logs, "signoff.calls")
    assert [c["run_id"] for c in calls] == [read.structured_content["run_id"], run_id]
    first, second = calls
    assert first["action"] == "invoice.get" and first["code"] == Code.SUCCEEDED
    assert second["action"] == "invoice.cancel" and second["code"] == Code.APPROVAL_REQUIRED
    for entry in calls:
        assert entry["tenant"] == "acme" and entry["principal"] == "agent-1"
        assert {"time", "level", "status", "retry", "duration_ms", "channel"} <= set(entry)
        assert "input" not in entry
    (decision,) = _lines(served.logs, "signoff.decisions")
    assert decision["run_id"] == run_id and decision["principal"] == LEAD.id
    assert decision["vote"] == "approve" and decision["accepted"] is True
    assert "waited_s" in decision
    assert SECRET_INVOICE not in served.logs.getvalue()  # inputs stay out of the logs


async def test_metrics_count_governed_calls_by_action_and_code_and_time_the_stages(
    served: Served,
) -> None:
    before = await _scrape(served.url)
    async with http_client(served.url, None) as client:
        await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
        await client.call_tool("invoice_get", {"invoice_id": "INV-2"})
        pending = await client.call_tool("invoice_cancel", LARGE)
    assert pending.structured_content is not None
    await served.runtime.decide(
        pending.structured_content["run_id"],
        "acme",
        DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE),
    )
    after = await _scrape(served.url)

    def moved(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    calls = "signoff_governed_calls_total"
    assert (
        moved(calls, action="invoice.get", status="SUCCEEDED", code="SUCCEEDED", retry="NEVER") == 2
    )
    assert (
        moved(
            calls,
            action="invoice.cancel",
            status="PENDING_APPROVAL",
            code="APPROVAL_REQUIRED",
            retry="AFTER_APPROVAL",
        )
        == 1
    )
    assert (
        moved(
            "signoff_governed_call_duration_seconds_count", action="invoice.get", status="SUCCEEDED"
        )
        == 2
    )
    for stage in ("resolve", "validate", "policy", "execute", "record"):
        assert moved("signoff_stage_duration_seconds_count", stage=stage) >= 2, stage
    assert (
        moved("signoff_approval_decisions_total", action="invoice.cancel", decision="approve") == 1
    )
    assert (
        moved("signoff_approval_wait_seconds_count", action="invoice.cancel", decision="approve")
        == 1
    )
    assert not any("run_id" in dict(labels) or "tenant" in dict(labels) for _, labels in after)
    assert after[("signoff_lane_capacity", frozenset())] == served.runtime.background_usage()[1]
    assert after[("signoff_lane_in_use", frozenset())] == 0


async def test_spans_nest_under_the_mcp_server_span_whose_parent_comes_from_meta(
    served: Served,
) -> None:
    spans = finished_spans()
    tracer = trace.get_tracer("the-agent")
    with tracer.start_as_current_span("agent turn") as agent:
        async with http_client(served.url, None) as client:
            denied = await client.call_tool(
                "invoice_cancel", {"invoice_id": "nope", "amount": 1, "idempotency_key": "k"}
            )
    assert denied.is_error
    trace_id = agent.get_span_context().trace_id
    mine = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
    (server,) = [s for s in mine if s.name == "tools/call invoice_cancel"]
    (sent,) = [s for s in mine if s.name == "MCP send tools/call invoice_cancel"]
    # The server handled the request in its own task, far from the client's context: its
    # parent can only have come from the traceparent the client put in ``_meta``.
    assert server.kind == trace.SpanKind.SERVER
    assert server.parent is not None and server.parent.span_id == sent.context.span_id
    assert server.attributes is not None
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "invoice_cancel"
    assert server.attributes["error.type"] == "tool_error"
    assert server.attributes["signoff.code"] == Code.INPUT_VALIDATION_FAILED
    run_id = server.attributes["signoff.run_id"]
    stages = [s for s in mine if s.name.startswith("signoff.")]
    assert {s.name for s in stages} >= {"signoff.resolve", "signoff.validate", "signoff.record"}
    for stage in stages:
        assert stage.parent is not None and stage.parent.span_id == server.context.span_id
        assert stage.attributes is not None and stage.attributes["signoff.run_id"] == run_id
    assert "signoff.input" not in server.attributes  # payloads only when asked for


async def test_a_compare_and_set_that_loses_to_a_concurrent_writer_is_counted() -> None:
    ledger = RunLedger(InMemoryStore(), SystemClock(), OperationsObserver())
    stored = await ledger.create(bare_run("WAITING_APPROVAL"), [])

    def conflicts() -> float:
        sample = METRICS.registry.get_sample_value(
            "signoff_cas_conflicts_total", {"operation": "cancelled"}
        )
        return sample or 0.0

    before = conflicts()
    result = ExecutionResult.cancelled(message="first")
    assert await ledger.terminal(stored, result, AuditKind.CANCELLED) is not None
    # The same, now stale, version again: another writer already moved the run on.
    assert await ledger.terminal(stored, result, AuditKind.CANCELLED) is None
    assert conflicts() - before == 1
