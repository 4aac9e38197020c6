"""Who is calling: identity from trusted context only — the launch configuration or a verified token.

Tool arguments never carry identity. On stdio (and the in-memory client) the whole connection acts as
the principal the server was launched as; over HTTP every request carries its own verified bearer
token, whose claims the auth middleware has already checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from pydantic import ValidationError

from signoff.core.identity import Principal


class IdentityError(ValueError):
    """The launch configuration or the token's claims do not name a usable identity."""


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated principal and the tenant whose data it acts on."""

    principal: Principal
    tenant_id: str


Identify = Callable[[ServerRequestContext[Any, Any]], Caller | None]
"""Resolves the caller of one MCP request; ``None`` means unauthenticated (a protocol fault)."""


def parse_roles(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Roles from a list, or from a string separated by commas and/or whitespace."""
    if value is None:
        return ()
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    if not all(isinstance(item, str) for item in items):
        raise IdentityError("roles must be strings")
    return tuple(sorted({item.strip() for item in items if item.strip()}))


def make_caller(
    principal: str | None, tenant: str | None, roles: str | Sequence[str] | None
) -> Caller:
    """Build a caller, refusing a missing or blank principal or tenant."""
    if not isinstance(principal, str) or not principal.strip():
        raise IdentityError("no principal: set --principal or SIGNOFF_PRINCIPAL")
    if not isinstance(tenant, str) or not tenant.strip():
        raise IdentityError("no tenant: set --tenant or SIGNOFF_TENANT")
    try:
        return Caller(
            principal=Principal(id=principal.strip(), roles=parse_roles(roles)),
            tenant_id=tenant.strip(),
        )
    except ValidationError as exc:
        raise IdentityError(f"invalid identity: {exc.errors()[0]['msg']}") from exc


def caller_from_claims(claims: Mapping[str, Any]) -> Caller:
    """The caller a verified JWT names: ``sub``, ``tenant`` and ``roles`` (list or string)."""
    return make_caller(claims.get("sub"), claims.get("tenant"), claims.get("roles"))


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
