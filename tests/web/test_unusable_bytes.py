"""NUL and other unusable bytes in a path or query answer 400 with a stable code on every route —
MCP, API, inbox, links, callbacks, operator endpoints — whatever the store (PostgreSQL answered
``GET /api/runs/abc%00def`` with a 500: it refuses NUL in text)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from signoff import Code
from signoff.core.ports import Store
from signoff.surfaces.ops import Health, ops_routes
from signoff.surfaces.ops.metrics import MetricsEndpoint
from tests.store.conftest import SQL, Backend, _url_for, mysql_url, postgres_url
from tests.web.support import Site, bearer, site_for_tests, token

__all__ = ["mysql_url", "postgres_url"]  # session fixtures the backends use

UNUSABLE = ["%00", "%01", "%1b", "%ff", "%ed%a0%80"]  # NUL, controls, not UTF-8, a lone surrogate
# Every route family, with the bad bytes in its path or its query (``{}``).
TARGETS = [
    ("POST", "/mcp{}"),
    ("POST", "/mcp?session={}"),
    ("GET", "/api/runs/abc{}def"),
    ("POST", "/api/runs/abc{}def/approve"),
    ("POST", "/api/runs/abc{}def/reject"),
    ("POST", "/api/runs/abc{}def/redispatch"),
    ("GET", "/api/approvals?action=invoice{}cancel"),
    ("GET", "/api/limits/invoice{}cancel"),
    ("GET", "/api/limits/invoice.cancel?principal=agent{}1"),
    ("GET", "/approvals?q=INV{}1"),
    ("GET", "/approvals/runs/abc{}def"),
    ("POST", "/approvals/runs/abc{}def/decide"),
    ("GET", "/approvals/links/tok{}en"),
    ("POST", "/approvals/links/tok{}en"),
    ("POST", "/api/callbacks/abc{}def"),
    ("POST", "/api/slack/interactions?x={}"),
    ("GET", "/readyz?probe={}"),
    ("GET", "/metrics?x={}"),
    ("GET", "/healthz{}"),
]


@pytest.fixture(params=SQL)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend = Backend(request.param, _url_for(request.param, request, tmp_path))
    try:
        yield await backend.open()
    finally:
        await backend.close_all()


@pytest.fixture
async def site(store: Store) -> AsyncIterator[Site]:
    async with site_for_tests(store) as built:
        health = Health(store, lambda: len(built.runtime.actions()))
        built.app.router.routes.extend(ops_routes(health, MetricsEndpoint(store).route()))
        yield built


async def _ask(client: httpx.AsyncClient, method: str, target: str) -> httpx.Response:
    return await client.request(method, target, json={} if method == "POST" else None)


@pytest.mark.parametrize(("method", "target"), TARGETS, ids=[t for _, t in TARGETS])
async def test_an_unusable_byte_in_a_path_or_query_is_refused_with_a_stable_code(
    site: Site, method: str, target: str
) -> None:
    approver = site.client(bearer())
    agent = site.client(
        {
            "Authorization": f"Bearer {token('agent-1', roles=('billing',), scopes=('signoff:propose',))}"
        }
    )
    client = agent if target.startswith("/mcp") else approver
    for bad in UNUSABLE:
        answer = await _ask(client, method, target.format(bad))
        assert answer.status_code == 400, (bad, answer.status_code, answer.text[:200])
        if target.startswith("/approvals"):
            assert Code.INPUT_VALIDATION_FAILED in answer.text
        else:
            assert answer.json()["code"] == Code.INPUT_VALIDATION_FAILED


async def test_usable_text_still_reaches_the_routes(site: Site) -> None:
    approver = site.client(bearer())
    # Percent-escaped UTF-8 and spaces are fine: a missing run is still a plain 404.
    answer = await approver.get("/api/runs/r%C3%A9sum%C3%A9%20x")
    assert answer.status_code == 404
    assert answer.json()["code"] == Code.ACTION_RUN_NOT_FOUND
    # A tab or a newline in a search reaches the inbox (which asks for a sign-in here).
    assert (await approver.get("/approvals?q=INV%091%0A")).status_code < 400
