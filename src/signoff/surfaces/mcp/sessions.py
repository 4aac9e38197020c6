"""Fair shares of the stateful MCP sessions one process holds (contract §9).

The SDK's session manager caps sessions process-wide (10,000) and closes a session after 30
minutes without a request, so one principal opening sessions in a loop could take every slot and
leave every other tenant with 503. Here each principal (the verified token's client, issuer and
subject, as the SDK ties a session to its creator) holds at most ``per_principal`` open sessions,
and idle sessions close after ``idle_timeout`` seconds (default 5 minutes). Stateless
(2026-07-28) requests open no session and are not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

log = logging.getLogger("signoff.sessions")

DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_PER_PRINCIPAL = 16
DEFAULT_MAX_SESSIONS = 10_000


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """``SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL``, ``SIGNOFF_MCP_MAX_SESSIONS``,
    ``SIGNOFF_MCP_SESSION_IDLE_SECONDS``."""

    per_principal: int = DEFAULT_PER_PRINCIPAL
    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        if not 1 <= self.per_principal <= self.max_sessions:
            raise ValueError(
                "SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL must be between 1 and SIGNOFF_MCP_MAX_SESSIONS"
            )
        if not 0 < self.idle_timeout <= 1800:
            raise ValueError("SIGNOFF_MCP_SESSION_IDLE_SECONDS must be in (0, 1800]")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SessionLimits:
        try:
            return cls(
                per_principal=int(
                    env.get("SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL") or DEFAULT_PER_PRINCIPAL
                ),
                max_sessions=int(env.get("SIGNOFF_MCP_MAX_SESSIONS") or DEFAULT_MAX_SESSIONS),
                idle_timeout=float(
                    env.get("SIGNOFF_MCP_SESSION_IDLE_SECONDS") or DEFAULT_IDLE_TIMEOUT
                ),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"MCP session settings: {exc}") from exc


class FairSessionManager(StreamableHTTPSessionManager):
    """The SDK's manager with a per-principal share of its sessions.

    Admission runs under the manager's session-creation lock, so concurrent ``initialize``s of one
    principal cannot overshoot its share. A refused one gets the SDK's 503 "Too many open sessions".
    """

    def __init__(
        self,
        app: Server[Any],
        *,
        limits: SessionLimits,
        json_response: bool = False,
        security_settings: TransportSecuritySettings | None = None,
    ) -> None:
        super().__init__(
            app,
            json_response=json_response,
            security_settings=security_settings,
            session_idle_timeout=limits.idle_timeout,
            max_sessions=limits.max_sessions,
        )
        self.limits = limits

    def sessions_of(self, requestor: AuthorizationContext) -> int:
        return sum(1 for owner in self._session_owners.values() if owner == requestor)

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if requestor is not None and self.sessions_of(requestor) >= self.limits.per_principal:
            log.warning(
                "refusing a new MCP session: %s already holds %d (SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL)",
                requestor.get("subject") or requestor.get("client_id"),
                self.limits.per_principal,
            )
            return None
        return super()._admit_session(requestor)
