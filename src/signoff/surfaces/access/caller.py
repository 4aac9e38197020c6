"""Who is calling, on every surface: the authenticated principal and tenant, from trusted context only.

Tool arguments never carry identity. MCP over stdio acts as the principal the server was launched as;
HTTP requests (MCP, the API, the inbox) carry verified tokens whose claims become a ``Caller`` here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from signoff.core.identity import Principal
from signoff.core.input_limits import is_plain_text
from signoff.core.visibility import Reader, ReaderKind


class IdentityError(ValueError):
    """The launch configuration or the token's claims do not name a usable identity."""


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated principal and the tenant whose data it acts on."""

    principal: Principal
    tenant_id: str

    def reader(self, kind: ReaderKind = ReaderKind.AGENT) -> Reader:
        """This caller as a reader of runs (``core.visibility``): an agent unless told."""
        return Reader(self.principal, self.tenant_id, kind)


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


MAX_IDENTITY_CHARS = 255


def caller_from_claims(claims: Mapping[str, Any]) -> Caller:
    """The caller a verified JWT names: ``sub``, ``tenant`` and ``roles`` (a list of strings).

    Claims are validated, never normalised: a tenant or role that is not exactly a clean token
    (surrounding or inner whitespace of any kind, control, bidi or zero-width characters, more
    than 255 characters) or roles that are not a list of such strings refuse the token.
    """
    subject = _claim_text("sub", claims.get("sub"), inner_space=True)
    tenant = _claim_text("tenant", claims.get("tenant"))
    raw_roles = claims.get("roles", [])
    if not isinstance(raw_roles, list):
        raise IdentityError("roles must be a list of strings")
    roles = tuple(sorted({_claim_text("role", role) for role in raw_roles}))
    return Caller(principal=Principal(id=subject, roles=roles), tenant_id=tenant)


def _claim_text(what: str, value: object, *, inner_space: bool = False) -> str:
    if not isinstance(value, str) or not value:
        raise IdentityError(f"{what} must be a non-empty string")
    if len(value) > MAX_IDENTITY_CHARS:
        raise IdentityError(f"{what} is longer than {MAX_IDENTITY_CHARS} characters")
    if value != value.strip() or not is_plain_text(value):
        raise IdentityError(f"{what} has surrounding whitespace or invisible characters")
    if not inner_space and any(char.isspace() for char in value):
        raise IdentityError(f"{what} must not contain whitespace")
    return value
