"""Malformed but validly signed claims are 401 on every surface, never 500, and never normalised.

Each token below is signed with the deployment's real secret, so only claim validation can refuse
it. The same token is tried on ``/mcp``, ``/api`` and the inbox sign-in, twice (the verifier caches
verified tokens, so a claim that breaks only on later uses is caught too).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import jwt
import pytest

from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_PROPOSE
from tests.surfaces.support import running
from tests.web.support import JWT_SECRET, Site, build_site, hidden

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


def signed(scope: str, **overrides: Any) -> str:
    claims: dict[str, Any] = {
        "sub": "lead-1",
        "tenant": "acme",
        "roles": ["billing-lead"],
        "exp": int(time.time()) + 600,
        "scope": scope,
    }
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not ...}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


@pytest.fixture
async def live() -> AsyncIterator[tuple[Site, str]]:
    site = build_site()
    async with running(site.app) as url:
        yield site, url
    await site.runtime.drain()


async def answers(url: str, **claims: Any) -> dict[str, int]:
    """The HTTP status each surface gives a token with ``claims`` (and that surface's scope)."""
    agent = signed(DEFAULT_PROPOSE, **claims)
    approver = signed(DEFAULT_APPROVE, **claims)
    async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
        mcp = await http.post(
            "/mcp",
            json=INITIALIZE,
            headers={
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {agent}",
            },
        )
        api = await http.get("/api/approvals", headers={"Authorization": f"Bearer {approver}"})
        form = await http.get("/approvals/sign-in")
        csrf = hidden(form.text, "csrf")
        inbox = await http.post(
            "/approvals/sign-in",
            data={"csrf": csrf, "token": approver, "next": "/approvals"},
            follow_redirects=False,
        )
    return {
        "mcp": mcp.status_code,
        "api": api.status_code,
        "inbox": 303 if inbox.status_code == 303 else inbox.status_code,
    }


REFUSED = {"mcp": 401, "api": 401, "inbox": 401}
ACCEPTED = {"mcp": 200, "api": 200, "inbox": 303}

MALFORMED = {
    "exp-as-string": {"exp": str(int(time.time()) + 600)},
    "exp-as-bool": {"exp": True},
    "roles-a-number": {"roles": 5},
    "roles-a-mapping": {"roles": {"billing-lead": False}},
    "roles-a-string": {"roles": "billing-lead"},
    "roles-not-strings": {"roles": [1, 2]},
    "role-with-space": {"roles": [" billing-lead"]},
    "role-with-newline": {"roles": ["billing-lead\n"]},
    "tenant-padded": {"tenant": " acme "},
    "tenant-newline": {"tenant": "acme\n"},
    "tenant-ideographic-space": {"tenant": "acme\u3000"},
    "tenant-bidi": {"tenant": "ac\u202eme"},
    "tenant-nul": {"tenant": "ac\x00me"},
    "tenant-too-long": {"tenant": "a" * 256},
    "tenant-a-number": {"tenant": 7},
    "sub-padded": {"sub": "lead-1 "},
    "sub-control": {"sub": "lead\x07-1"},
    "sub-too-long": {"sub": "l" * 256},
}


@pytest.mark.parametrize("claims", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_a_validly_signed_token_with_malformed_claims_is_401_on_every_surface_every_time(
    live: tuple[Site, str], claims: dict[str, Any]
) -> None:
    site, url = live
    assert await answers(url, **claims) == REFUSED
    assert await answers(url, **claims) == REFUSED
    async with site.store.unit() as unit:
        assert await unit.runs.list() == []


async def test_well_formed_claims_are_accepted_on_every_surface(live: tuple[Site, str]) -> None:
    _site, url = live
    assert await answers(url) == ACCEPTED
    assert await answers(url) == ACCEPTED


async def test_one_clock_leeway_holds_on_mcp_api_and_the_inbox(live: tuple[Site, str]) -> None:
    _site, url = live
    now = int(time.time())
    # Inside the leeway: every surface accepts; well past it: every surface refuses.
    assert await answers(url, exp=now - 2) == ACCEPTED
    assert await answers(url, exp=now - 60) == REFUSED
