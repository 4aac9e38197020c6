"""Approvers' identity from a bearer token, verified by the same verifier ``/mcp`` uses.

The token's claims name the principal (``sub``), its roles and its tenant; nothing in a request
body or form ever does. The token must be an approver's credential: its scope holds the approve
scope and not the propose scope (``signoff.surfaces.access.scopes``), so an agent's token never decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.auth.provider import TokenVerifier
from starlette.requests import Request

from signoff.surfaces.access.caller import Caller, IdentityError, caller_from_claims
from signoff.surfaces.access.scopes import ScopeRefusal, Scopes


@dataclass(frozen=True, slots=True)
class Verified:
    """A caller and when its token stops being valid (Unix seconds)."""

    caller: Caller
    expires_at: int | None
    client_id: str | None


class Authenticator:
    def __init__(self, verifier: TokenVerifier, scopes: Scopes | None = None) -> None:
        self.verifier = verifier
        self.scopes = scopes or Scopes()

    async def verify(self, token: str, *, operator: bool = False) -> Verified | ScopeRefusal | None:
        """The approver (``operator``: the operator) a token names; a ``ScopeRefusal`` for a
        valid token of the wrong kind; ``None`` for anything not valid."""
        token = token.strip()
        if not token:
            return None
        access = await self.verifier.verify_token(token)
        if access is None:
            return None
        try:
            caller = caller_from_claims(access.claims or {})
        except IdentityError:
            return None
        check = self.scopes.operator_refusal if operator else self.scopes.approver_refusal
        refusal = check(access.scopes)
        if refusal is not None:
            return refusal
        client = access.client_id if access.client_id != caller.principal.id else None
        return Verified(caller, access.expires_at, client)

    async def from_request(
        self, request: Request, *, operator: bool = False
    ) -> Verified | ScopeRefusal | None:
        """``Authorization: Bearer <token>`` only; cookies never authenticate the JSON API."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return await self.verify(token, operator=operator)
