"""Credentials as contract §1: an agent's token proposes, an approver's token decides, never both.

The matrix runs every kind of token against every surface through a real HTTP server: ``/mcp``
(an MCP ``initialize``), the approvers' JSON API and the inbox sign-in form.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from signoff import Code
from signoff.core.run import RunStatus
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier, issue_token
from signoff.surfaces.access.scopes import (
    DEFAULT_APPROVE,
    DEFAULT_PROPOSE,
    ScopeConfigError,
    Scopes,
)
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.web import build_web
from tests.surfaces.support import running
from tests.web.support import JWT_SECRET, Site, build_site, hidden, web_config

AUDIENCE = "https://signoff.test/mcp"
KINDS: dict[str, dict[str, Any]] = {
    "propose-only": {"scopes": [DEFAULT_PROPOSE]},
    "approve-only": {"scopes": [DEFAULT_APPROVE]},
    "both": {"scopes": [DEFAULT_PROPOSE, DEFAULT_APPROVE]},
    "none": {"scopes": []},
    "wrong audience": {"scopes": [DEFAULT_APPROVE, "x"], "audience": "https://elsewhere.test"},
}
# What each surface answers each kind with (HTTP status).
EXPECTED: dict[str, dict[str, int]] = {
    "mcp": {
        "propose-only": 200,
        "approve-only": 403,
        "both": 200,
        "none": 403,
        "wrong audience": 401,
    },
    "api": {
        "propose-only": 403,
        "approve-only": 200,
        "both": 403,
        "none": 403,
        "wrong audience": 401,
    },
    "sign-in": {
        "propose-only": 403,
        "approve-only": 303,
        "both": 403,
        "none": 403,
        "wrong audience": 401,
    },
}
# The scope a 403 names on each surface.
NEEDED = {"mcp": DEFAULT_PROPOSE, "api": DEFAULT_APPROVE, "sign-in": DEFAULT_APPROVE}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


def kind_token(kind: str, sub: str = "lead-1", roles: Sequence[str] = ("billing-lead",)) -> str:
    spec = KINDS[kind]
    return issue_token(
        JWT_SECRET,
        sub,
        "acme",
        roles,
        scopes=spec["scopes"],
        audience=spec.get("audience", AUDIENCE),
    )


@pytest.fixture
async def served() -> AsyncIterator[tuple[Site, str]]:
    site = build_site(jwt_config=JwtConfig(secret=JWT_SECRET, audience=AUDIENCE))
    async with running(site.app) as url:
        yield site, url
    await site.runtime.drain()


async def _present(surface: str, url: str, jwt: str) -> httpx.Response:
    bearer = {"Authorization": f"Bearer {jwt}"}
    async with httpx.AsyncClient(base_url=url) as http:
        if surface == "mcp":
            return await http.post(
                "/mcp",
                json=INITIALIZE,
                headers={"Accept": "application/json, text/event-stream", **bearer},
            )
        if surface == "api":
            return await http.get("/api/approvals", headers=bearer)
        form = await http.get("/approvals/sign-in")
        response = await http.post(
            "/approvals/sign-in",
            data={"csrf": hidden(form.text, "csrf"), "token": jwt, "next": "/approvals"},
        )
        # Signed in exactly when the sign-in answered with its redirect.
        inbox = await http.get("/approvals")
        assert (inbox.status_code == 200) == (response.status_code == 303)
        return response


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("surface", list(EXPECTED))
async def test_each_kind_of_token_gets_the_answer_the_contract_gives_on_each_surface(
    served: tuple[Site, str], surface: str, kind: str
) -> None:
    _site, url = served
    response = await _present(surface, url, kind_token(kind))
    assert response.status_code == EXPECTED[surface][kind], response.text
    if response.status_code == 403:
        if surface != "sign-in":
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer ")
            assert 'error="insufficient_scope"' in challenge
            assert f'scope="{NEEDED[surface]}"' in challenge
            assert response.json()["scope"] == NEEDED[surface]
        if surface == "api":
            assert response.json()["code"] == Code.INSUFFICIENT_SCOPE
        if surface == "sign-in":
            assert Code.INSUFFICIENT_SCOPE in response.text
            assert NEEDED[surface] in response.text
    if response.status_code == 401 and surface != "sign-in":
        assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_an_agent_token_with_an_approver_role_cannot_approve_another_agents_run(
    served: tuple[Site, str],
) -> None:
    site, url = served
    pending = await site.propose()
    assert pending.run_id is not None
    # An agent whose roles include billing-lead, holding the agent scope (and even the approve
    # scope besides): the API refuses before anything is decided.
    for kind in ("propose-only", "both"):
        jwt = kind_token(kind, sub="agent-2", roles=("billing", "billing-lead"))
        async with httpx.AsyncClient(base_url=url) as http:
            approve = await http.post(
                f"/api/runs/{pending.run_id}/approve",
                json={"reason": "looks fine"},
                headers={"Authorization": f"Bearer {jwt}"},
            )
            show = await http.get(
                f"/api/runs/{pending.run_id}", headers={"Authorization": f"Bearer {jwt}"}
            )
        assert approve.status_code == 403 and approve.json()["code"] == Code.INSUFFICIENT_SCOPE
        assert show.status_code == 403
    run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.decisions == ()
    assert site.recorder.count == 0


async def test_scope_names_are_settings_and_the_metadata_lists_them() -> None:
    scopes = Scopes(propose="acme.agent", approve="acme.approver")
    site = build_site(config=web_config(scopes=scopes))
    verifier = JwtVerifier(JwtConfig(secret=JWT_SECRET))
    web = build_web(site.runtime, site.config, verifier)
    app = build_http_app(
        site.runtime,
        BearerAuth(verifier, "http://127.0.0.1:8000", ["https://idp.test"], scopes),
        HttpOptions(routes=web.routes),
    )
    agent = issue_token(JWT_SECRET, "agent-1", "acme", ["billing"], scopes=["acme.agent"])
    default_agent = issue_token(
        JWT_SECRET, "agent-1", "acme", ["billing"], scopes=[DEFAULT_PROPOSE]
    )
    lead = issue_token(JWT_SECRET, "lead-1", "acme", ["billing-lead"], scopes=["acme.approver"])
    async with running(app) as url, httpx.AsyncClient(base_url=url) as http:
        metadata = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        headers = {"Accept": "application/json, text/event-stream"}
        ok = await http.post(
            "/mcp", json=INITIALIZE, headers={**headers, "Authorization": f"Bearer {agent}"}
        )
        refused = await http.post(
            "/mcp",
            json=INITIALIZE,
            headers={**headers, "Authorization": f"Bearer {default_agent}"},
        )
        api = await http.get("/api/approvals", headers={"Authorization": f"Bearer {lead}"})
    assert metadata["scopes_supported"] == ["acme.agent", "acme.approver"]
    assert metadata["authorization_servers"] == ["https://idp.test/"]
    assert ok.status_code == 200
    assert (
        refused.status_code == 403 and 'scope="acme.agent"' in refused.headers["www-authenticate"]
    )
    assert api.status_code == 200
    await site.runtime.drain()


@pytest.mark.parametrize(
    "env",
    [
        {"SIGNOFF_SCOPE_PROPOSE": "has space"},
        {"SIGNOFF_SCOPE_APPROVE": 'quote"d'},
        {"SIGNOFF_SCOPE_PROPOSE": "same", "SIGNOFF_SCOPE_APPROVE": "same"},
    ],
)
def test_an_unusable_scope_setting_is_refused_at_start(env: dict[str, str]) -> None:
    with pytest.raises(ScopeConfigError):
        Scopes.from_env(env)
