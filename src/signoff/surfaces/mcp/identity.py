"""Where an MCP request's caller comes from: the launch configuration or a verified bearer token.

On stdio (and the in-memory client) the whole connection acts as the principal the server was
launched as; over HTTP every request carries its own verified bearer token, whose claims the auth
middleware has already checked. What a caller is lives in ``signoff.surfaces.access.caller``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext

from signoff.surfaces.access.caller import Caller, IdentityError, caller_from_claims

Identify = Callable[[ServerRequestContext[Any, Any]], Caller | None]
"""Resolves the caller of one MCP request; ``None`` means unauthenticated (a protocol fault)."""


def fixed_identity(caller: Caller) -> Identify:
    """Every request acts as ``caller`` (stdio, the in-memory client, loopback test servers)."""

    def identify(_ctx: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    return identify


def bearer_identity(ctx: ServerRequestContext[Any, Any]) -> Caller | None:
    """The caller named by this HTTP request's verified bearer token, or ``None``."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if not isinstance(scope, Mapping):
        return None
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    try:
        return caller_from_claims(user.access_token.claims or {})
    except IdentityError:
        return None
