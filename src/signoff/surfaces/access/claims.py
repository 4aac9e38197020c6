"""Where a token's tenant, roles and scopes are, for identity providers that put them elsewhere.

signoff reads ``sub``, ``tenant``, ``roles`` (a list of strings) and ``scope`` (space-separated)
by default. A provider that names them otherwise is mapped with, each a claim name or a dotted
path into nested objects (an exact claim name is tried first, so namespaced claims such as
``https://signoff.example/roles`` work as they are)::

    SIGNOFF_JWT_TENANT_CLAIM   e.g. tid (Entra ID), hd (Google Workspace), org_id
    SIGNOFF_JWT_ROLES_CLAIM    e.g. groups (Okta), realm_access.roles (Keycloak)
    SIGNOFF_JWT_SCOPE_CLAIM    e.g. scp (Entra ID, Okta; a string or a list)
    SIGNOFF_JWT_TENANT         one fixed tenant for every token (a single-tenant deployment
                               whose provider has no tenant claim); the claim is then not read

The mapped values replace ``tenant``, ``roles`` and ``scope`` in the claims every surface reads
(``caller.caller_from_claims`` validates them exactly as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The claim named ``path``, else the value at the dotted ``path``; ``None`` when absent."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


@dataclass(frozen=True)
class ClaimNames:
    """Where to read the tenant, the roles and the scopes of a verified token."""

    tenant: str = "tenant"
    roles: str = "roles"
    scope: str = "scope"
    fixed_tenant: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClaimNames:
        return cls(
            tenant=env.get("SIGNOFF_JWT_TENANT_CLAIM") or "tenant",
            roles=env.get("SIGNOFF_JWT_ROLES_CLAIM") or "roles",
            scope=env.get("SIGNOFF_JWT_SCOPE_CLAIM") or "scope",
            fixed_tenant=env.get("SIGNOFF_JWT_TENANT") or None,
        )

    def mapped(self, claims: Mapping[str, Any]) -> dict[str, Any]:
        """``claims`` with ``tenant``, ``roles`` and ``scope`` read from where they are."""
        found = dict(claims)
        found["tenant"] = (
            self.fixed_tenant if self.fixed_tenant is not None else claim_at(claims, self.tenant)
        )
        roles = claim_at(claims, self.roles)
        found["roles"] = [] if roles is None else roles
        scope = claim_at(claims, self.scope)
        if isinstance(scope, list) and all(isinstance(item, str) for item in scope):
            scope = " ".join(scope)
        if isinstance(scope, str):
            found["scope"] = scope
        else:
            found.pop("scope", None)
        return found
