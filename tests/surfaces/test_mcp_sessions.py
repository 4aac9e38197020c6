"""Fair shares of MCP sessions: one principal exhausting its share while another still connects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2
import pytest

from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier, issue_token
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.mcp.sessions import DEFAULT_IDLE_TIMEOUT, FairSessionManager, SessionLimits
from tests.surfaces.support import DEADLINE, SECRET, running, world

SHARE = 3
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


def token(sub: str, tenant: str) -> str:
    return issue_token(SECRET, sub, tenant, ["billing"], scopes=[DEFAULT_PROPOSE])


@dataclass
class Served:
    url: str
    manager: FairSessionManager


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    w = world()
    verifier = JwtVerifier(JwtConfig(secret=SECRET))
    limits = SessionLimits(per_principal=SHARE, max_sessions=50)
    app = build_http_app(
        w.runtime, BearerAuth(verifier, "http://127.0.0.1"), HttpOptions(sessions=limits)
    )
    async with running(app) as url:
        manager = app.state.session_manager
        assert isinstance(manager, FairSessionManager)
        yield Served(url, manager)


async def initialize(http: httpx2.AsyncClient, url: str, jwt: str) -> httpx2.Response:
    return await http.post(
        url + "/mcp",
        json=INITIALIZE,
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {jwt}",
        },
    )


async def test_one_principal_exhausting_its_session_share_leaves_room_for_everyone_else(
    served: Served,
) -> None:
    flooder = token("agent-flood", "t1")
    timeout = httpx2.Timeout(DEADLINE)
    async with httpx2.AsyncClient(timeout=timeout) as http:
        opened = [await initialize(http, served.url, flooder) for _ in range(SHARE)]
        assert [r.status_code for r in opened] == [200] * SHARE
        refused = [await initialize(http, served.url, flooder) for _ in range(5)]
        assert {r.status_code for r in refused} == {503}
        # Another principal, of this tenant or another one, still connects.
        for other in (token("agent-2", "t1"), token("agent-3", "t2")):
            assert (await initialize(http, served.url, other)).status_code == 200
        # Closing one of its sessions gives the flooder exactly one slot back.
        session_id = opened[0].headers["mcp-session-id"]
        closed = await http.delete(
            served.url + "/mcp",
            headers={
                "Authorization": f"Bearer {flooder}",
                "mcp-session-id": session_id,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert closed.status_code < 300
        assert (await initialize(http, served.url, flooder)).status_code == 200
        assert (await initialize(http, served.url, flooder)).status_code == 503
    assert served.manager.max_sessions == 50


def test_idle_sessions_close_well_before_the_sdks_thirty_minutes_by_default() -> None:
    limits = SessionLimits()
    assert limits.idle_timeout == DEFAULT_IDLE_TIMEOUT < 30 * 60
    limits = SessionLimits.from_env(
        {"SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL": "4", "SIGNOFF_MCP_SESSION_IDLE_SECONDS": "60"}
    )
    assert (limits.per_principal, limits.idle_timeout) == (4, 60.0)


@pytest.mark.parametrize(
    "env",
    [
        {"SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL": "0"},
        {"SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL": "many"},
        {"SIGNOFF_MCP_SESSION_IDLE_SECONDS": "7200"},
        {"SIGNOFF_MCP_MAX_SESSIONS": "2", "SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL": "3"},
    ],
)
def test_unusable_session_settings_are_refused_at_start(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"SIGNOFF_MCP|MCP session"):
        SessionLimits.from_env(env)
