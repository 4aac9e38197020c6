"""Where each identity provider puts tenant, roles and scopes, mapped onto what signoff reads
(docs/identity.md), and the JWT settings that choose the keys."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.surfaces.access.caller import caller_from_claims
from signoff.surfaces.access.claims import ClaimNames, claim_at
from signoff.surfaces.access.jwt import JwtConfig, JwtConfigError

BASE = {"sub": "u-1", "exp": 4_000_000_000}


@pytest.mark.parametrize(
    ("provider", "names", "claims", "tenant", "roles", "scope"),
    [
        (
            "Keycloak",
            ClaimNames(roles="realm_access.roles"),
            {"tenant": "acme", "realm_access": {"roles": ["billing-lead"]}, "scope": "openid"},
            "acme",
            ["billing-lead"],
            "openid",
        ),
        (
            "Microsoft Entra ID",
            ClaimNames(tenant="tid", scope="scp"),
            {"tid": "72f988bf", "roles": ["billing-lead"], "scp": "signoff:approve"},
            "72f988bf",
            ["billing-lead"],
            "signoff:approve",
        ),
        (
            "Okta",
            ClaimNames(tenant="org", roles="groups", scope="scp"),
            {"org": "acme", "groups": ["billing"], "scp": ["signoff:propose", "openid"]},
            "acme",
            ["billing"],
            "signoff:propose openid",
        ),
        (
            "Auth0",
            ClaimNames(
                tenant="https://signoff.example/tenant", roles="https://signoff.example/roles"
            ),
            {
                "https://signoff.example/tenant": "acme",
                "https://signoff.example/roles": ["billing-lead"],
                "scope": "signoff:approve",
            },
            "acme",
            ["billing-lead"],
            "signoff:approve",
        ),
        (
            "Google (one fixed tenant, roles from a broker)",
            ClaimNames(fixed_tenant="acme"),
            {"hd": "acme.example", "email": "u@acme.example"},
            "acme",
            [],
            None,
        ),
    ],
)
def test_each_providers_claims_map_onto_signoffs_identity(
    provider: str,
    names: ClaimNames,
    claims: dict[str, Any],
    tenant: str,
    roles: list[str],
    scope: str | None,
) -> None:
    mapped = names.mapped({**BASE, **claims})
    caller = caller_from_claims(mapped)
    assert (caller.tenant_id, list(caller.principal.roles)) == (tenant, roles), provider
    assert mapped.get("scope") == scope


def test_a_fixed_tenant_ignores_a_tenant_claim_in_the_token() -> None:
    mapped = ClaimNames(fixed_tenant="acme").mapped({**BASE, "tenant": "globex"})
    assert mapped["tenant"] == "acme"


def test_a_mapped_claim_that_is_not_a_list_of_roles_still_refuses_the_token() -> None:
    mapped = ClaimNames(roles="groups").mapped({**BASE, "tenant": "acme", "groups": "admins"})
    with pytest.raises(ValueError):
        caller_from_claims(mapped)


def test_an_exact_claim_name_wins_over_a_dotted_path() -> None:
    claims = {"a.b": "exact", "a": {"b": "nested"}}
    assert claim_at(claims, "a.b") == "exact"
    assert claim_at({"a": {"b": "nested"}}, "a.b") == "nested"
    assert claim_at({"a": ["b"]}, "a.b") is None


def test_an_issuer_alone_means_oidc_discovery_and_key_urls_must_be_https() -> None:
    discovered = JwtConfig.from_env({"SIGNOFF_JWT_ISSUER": "https://idp.example"})
    by_url = JwtConfig.from_env({"SIGNOFF_JWT_JWKS_URL": "https://idp.example/keys"})
    assert discovered is not None and discovered.discover and discovered.remote
    assert by_url is not None and not by_url.discover and by_url.remote
    for env in (
        {"SIGNOFF_JWT_ISSUER": "http://idp.example"},
        {"SIGNOFF_JWT_JWKS_URL": "http://idp.example/keys"},
        {"SIGNOFF_JWT_JWKS_URL": "https://idp.example/keys", "SIGNOFF_JWT_SECRET": "x" * 40},
        {"SIGNOFF_JWT_ISSUER": "https://idp.example", "SIGNOFF_JWT_JWKS_REFRESH_SECONDS": "soon"},
    ):
        with pytest.raises(JwtConfigError):
            JwtConfig.from_env(env)


def test_the_claim_settings_are_read_from_the_environment() -> None:
    config = JwtConfig.from_env(
        {
            "SIGNOFF_JWT_ISSUER": "https://idp.example",
            "SIGNOFF_JWT_TENANT_CLAIM": "tid",
            "SIGNOFF_JWT_ROLES_CLAIM": "realm_access.roles",
            "SIGNOFF_JWT_SCOPE_CLAIM": "scp",
        }
    )
    assert config is not None
    assert config.claims == ClaimNames(tenant="tid", roles="realm_access.roles", scope="scp")
