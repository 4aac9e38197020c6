"""Operator endpoints over real HTTP: /healthz, /readyz, /metrics and the / landing page."""

from __future__ import annotations

import secrets
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from signoff import Code
from signoff.core.ports import Store
from signoff.observability import record_undecodable_row
from signoff.store.sql import SqlStore, create_engine, open_sql_store
from signoff.store.sql.tables import VERSION_TABLE
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.ops import Health, ops_routes
from signoff.surfaces.ops.metrics import MetricsEndpoint
from tests.store.conftest import POSTGRES_ENV, server_url
from tests.surfaces.support import World, http_client, running, world

LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}


@dataclass
class Ops:
    world: World
    store: SqlStore
    url: str
    draining: Draining


def _app(w: World, store: Store, draining: Draining) -> Any:
    health = Health(store, lambda: len(w.runtime.actions()), draining)
    scrape = MetricsEndpoint(store, w.runtime.now)
    caller = make_caller("agent-1", "acme", "billing")
    options = HttpOptions(routes=ops_routes(health, scrape.route()), draining=draining)
    return build_http_app(w.runtime, FixedIdentity(caller, "127.0.0.1"), options)


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[Ops]:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}")
    try:
        w = world(store=store)
        draining = Draining()
        async with running(_app(w, store, draining)) as url:
            yield Ops(w, store, url, draining)
        await w.runtime.drain()
    finally:
        await store.close()


async def _get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10) as client:
        return await client.get(url)


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_healthz_answers_and_the_landing_page_says_what_this_server_is(ops: Ops) -> None:
    health = await _get(ops.url + "/healthz")
    landing = await _get(ops.url + "/")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert landing.status_code == 200
    assert landing.headers["content-type"].startswith("text/html")
    assert "This server governs 2 actions" in landing.text
    for path in ("/mcp", "/healthz", "/readyz", "/metrics"):
        assert path in landing.text


async def test_readyz_is_ready_with_the_store_at_head_and_the_manifests_loaded(ops: Ops) -> None:
    ready = await _get(ops.url + "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"store": "ok", "manifests": "ok", "shutdown": "ok"},
    }


async def test_readyz_answers_503_once_shutdown_begins(ops: Ops) -> None:
    ops.draining.begin()
    answer = await _get(ops.url + "/readyz")
    assert answer.status_code == 503
    assert answer.json()["reasons"] == {"shutdown": "SHUTTING_DOWN"}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _readyz_of(url: str, caplog: pytest.LogCaptureFixture) -> tuple[httpx2.Response, int]:
    """/readyz and /healthz of a server whose database is at ``url``."""
    engine = create_engine(url)
    store = SqlStore(engine)
    w = world()
    try:
        with caplog.at_level("WARNING", logger="signoff.health"):
            async with running(_app(w, store, Draining())) as served:
                answer = await _get(served + "/readyz")
                health = await _get(served + "/healthz")
    finally:
        await engine.dispose()
    return answer, health.status_code


async def test_readyz_answers_503_with_a_stable_code_when_the_database_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A server whose database went away after it started: nothing listens on that port now.
    port = _closed_port()
    answer, health = await _readyz_of(
        f"postgresql+asyncpg://signoff@127.0.0.1:{port}/signoff", caplog
    )
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "not ready"
    assert body["reasons"] == {"store": "STORE_UNREACHABLE"}
    assert body["checks"]["store"] == "STORE_UNREACHABLE"
    assert str(port) not in answer.text and "Error" not in answer.text
    assert health == 200  # the process itself is fine: do not restart it
    assert str(port) in caplog.text  # the operator's log says what the driver said


@pytest.mark.postgres
async def test_readyz_never_names_the_database_or_shows_driver_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    base = make_url(server_url(POSTGRES_ENV, "PostgreSQL"))
    hidden = "erp_prod_" + secrets.token_hex(4)  # PostgreSQL answers: database "..." does not exist
    url = base.set(database=hidden).render_as_string(hide_password=False)
    answer, _ = await _readyz_of(url, caplog)
    assert answer.status_code == 503
    assert answer.json()["reasons"] == {"store": "STORE_UNREACHABLE"}
    assert hidden not in answer.text and "database" not in answer.text.lower()
    assert hidden in caplog.text


async def test_readyz_answers_503_when_the_schema_is_not_at_this_builds_head(ops: Ops) -> None:
    async with ops.store.engine.begin() as conn:
        await conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0001'"))
    answer = await _get(ops.url + "/readyz")
    assert answer.status_code == 503
    assert answer.json()["reasons"]["store"] == "DATABASE_SCHEMA_OUT_OF_DATE"


async def test_metrics_move_with_governed_calls_with_low_cardinality_labels(ops: Ops) -> None:
    before = _samples((await _get(ops.url + "/metrics")).text)
    async with http_client(ops.url, None) as client:
        read = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
        pending = await client.call_tool("invoice_cancel", LARGE)
        unknown = await client.call_tool("no_such_tool_" + "x" * 10, {})
    record_undecodable_row("runs")
    scraped = await _get(ops.url + "/metrics")
    after = _samples(scraped.text)
    assert scraped.headers["content-type"].startswith("text/plain")
    assert read.structured_content is not None and pending.structured_content is not None
    assert read.structured_content["code"] == Code.SUCCEEDED
    assert pending.structured_content["code"] == Code.APPROVAL_REQUIRED
    assert unknown.is_error

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    duration = "mcp_server_operation_duration_seconds_count"
    assert (
        moved(duration, mcp_method_name="tools/call", gen_ai_tool_name="invoice_get", error_type="")
        == 1
    )
    # A pending approval is not an error; an unknown tool is, and its name is not a label.
    assert (
        moved(
            duration, mcp_method_name="tools/call", gen_ai_tool_name="invoice_cancel", error_type=""
        )
        == 1
    )
    assert (
        moved(
            duration,
            mcp_method_name="tools/call",
            gen_ai_tool_name="unknown",
            error_type="tool_error",
        )
        == 1
    )
    assert _value(after, "signoff_pending_approvals") == 1
    assert _value(after, "signoff_nonterminal_runs", status="PENDING_APPROVAL") == 1
    assert moved("signoff_undecodable_rows_total", table="runs") == 1
    run_id = pending.structured_content["run_id"]
    assert run_id not in scraped.text and "acme" not in scraped.text
