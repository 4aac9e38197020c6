"""Bearer tokens from a real identity provider (an ``oidc-provider-mock`` process): keys found by
OIDC discovery, cached, refetched when the provider rotates its key, at most one fetch per
interval whatever kids tokens name, and every failure of the provider a 401, never a 500."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from signoff import Code
from signoff.surfaces.access.claims import ClaimNames
from signoff.surfaces.access.jwks import RemoteKeys
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier
from tests.surfaces.support import DEADLINE, free_socket
from tests.web.oidc_provider import Provider, id_token, oidc_provider
from tests.web.support import site_for_tests

pytestmark = pytest.mark.slow

CLIENT = "signoff-api"


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


def verifier_for(
    issuer: str, clock: Clock | None = None, *, jwks_url: str | None = None, **claims: Any
) -> JwtVerifier:
    config = JwtConfig(
        jwks_url=jwks_url,
        discover=jwks_url is None,
        issuer=issuer,
        audience=CLIENT,
        claims=ClaimNames(**claims),
    )
    remote = RemoteKeys(
        jwks_url=jwks_url,
        issuer=None if jwks_url else issuer,
        max_age=300,
        min_interval=30,
        clock=clock or Clock(),
    )
    return JwtVerifier(config, remote=remote)


def forged(kid: str, issuer: str) -> str:
    """A well-formed token naming ``kid``, signed by a key the provider never had."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims: dict[str, Any] = {"sub": "mallory", "tenant": "acme", "roles": ["billing-lead"]}
    claims |= {"iss": issuer, "aud": CLIENT, "exp": 4_000_000_000}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


async def test_keys_are_found_by_discovery_from_the_issuer_and_then_cached(
    provider: Provider,
) -> None:
    verifier = verifier_for(provider.issuer)
    assert verifier.remote is not None
    first = await verifier.verify_token(id_token(provider.issuer, "fin-lead", CLIENT))
    second = await verifier.verify_token(id_token(provider.issuer, "clerk", CLIENT))
    assert first is not None and first.subject == "fin-lead"
    assert first.claims is not None and first.claims["tenant"] == "acme"
    assert second is not None and second.subject == "clerk"
    assert verifier.remote.fetches == 2  # the discovery document, then the key set, once


async def test_after_the_provider_rotates_its_key_new_tokens_verify_after_one_refresh() -> None:
    clock = Clock()
    with oidc_provider() as before:
        verifier = verifier_for(before.issuer, clock)
        assert await verifier.verify_token(id_token(before.issuer, "fin-lead", CLIENT))
        port = int(before.issuer.rsplit(":", 1)[1])
    assert verifier.remote is not None
    fetched = verifier.remote.fetches
    with oidc_provider(port=port) as after:  # the same issuer, signing with a new key
        rotated = id_token(after.issuer, "fin-lead", CLIENT)
        refused_too_soon = await verifier.verify_token(rotated)
        clock.now += 30  # the refresh interval has passed
        accepted = await verifier.verify_token(rotated)
        again = await verifier.verify_token(id_token(after.issuer, "clerk", CLIENT))
    # Right after the last fetch the new key is not fetched yet; once the interval has passed,
    # one refresh of the key set (the discovered URL is kept) and every new token verifies.
    assert refused_too_soon is None
    assert accepted is not None and accepted.subject == "fin-lead"
    assert again is not None
    assert verifier.remote.fetches == fetched + 1


async def test_tokens_naming_random_kids_cost_at_most_one_fetch_per_interval(
    provider: Provider,
) -> None:
    clock = Clock()
    verifier = verifier_for(provider.issuer, clock)
    assert verifier.remote is not None
    assert await verifier.verify_token(id_token(provider.issuer, "fin-lead", CLIENT))
    fetched = verifier.remote.fetches
    for _ in range(3):
        clock.now += 30
        spray = [forged(uuid.uuid4().hex, provider.issuer) for _ in range(25)]
        # One after another, as an attacker's requests arrive (concurrent ones share a fetch).
        answers = [await verifier.verify_token(token) for token in spray]
        assert answers == [None] * 25
    assert verifier.remote.fetches == fetched + 3
    # And a real token still verifies from the cache, with no fetch of its own.
    assert await verifier.verify_token(id_token(provider.issuer, "clerk", CLIENT))
    assert verifier.remote.fetches == fetched + 3


async def test_concurrent_first_requests_share_one_fetch_and_all_verify(
    provider: Provider,
) -> None:
    verifier = verifier_for(provider.issuer, jwks_url=f"{provider.issuer}/jwks")
    assert verifier.remote is not None
    tokens = [id_token(provider.issuer, sub, CLIENT) for sub in ("fin-lead", "clerk") * 10]
    answers = await asyncio.gather(*(verifier.verify_token(token) for token in tokens))
    assert all(answer is not None for answer in answers)
    assert verifier.remote.fetches == 1


async def test_with_the_provider_down_the_api_answers_401_never_500() -> None:
    with oidc_provider() as gone:
        token = id_token(gone.issuer, "fin-lead", CLIENT)
        config = JwtConfig(discover=True, issuer=gone.issuer, audience=CLIENT)
    headers = {"Authorization": f"Bearer {token}"}
    async with site_for_tests(jwt_config=config) as site, site.client(headers) as http:
        listed = await http.get("/api/approvals")
    assert (listed.status_code, listed.json()["code"]) == (401, Code.UNAUTHENTICATED)


async def test_a_provider_that_never_answers_is_given_up_on_and_the_token_refused(
    provider: Provider,
) -> None:
    token = id_token(provider.issuer, "fin-lead", CLIENT)
    silent = free_socket()  # listens (connections queue) but nobody ever answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/jwks"
        config = JwtConfig(jwks_url=url, issuer=provider.issuer, audience=CLIENT)
        verifier = JwtVerifier(config, remote=RemoteKeys(jwks_url=url, timeout=0.2))
        assert await asyncio.wait_for(verifier.verify_token(token), DEADLINE) is None
    finally:
        silent.close()


async def test_roles_where_keycloak_puts_them_and_scopes_as_a_list_are_read(
    provider: Provider,
) -> None:
    keycloak = verifier_for(provider.issuer, roles="realm_access.roles")
    okta = verifier_for(provider.issuer, tenant="org", roles="groups", scope="scp")
    lead = await keycloak.verify_token(id_token(provider.issuer, "keycloak-lead", CLIENT))
    agent = await okta.verify_token(id_token(provider.issuer, "okta-agent", CLIENT))
    unmapped = await verifier_for(provider.issuer).verify_token(
        id_token(provider.issuer, "okta-agent", CLIENT)
    )
    assert lead is not None and lead.claims is not None
    assert lead.claims["roles"] == ["billing-lead"]
    assert agent is not None and agent.claims is not None
    assert (agent.claims["tenant"], agent.claims["roles"]) == ("acme", ["billing"])
    assert agent.scopes == ["signoff:propose"]
    assert unmapped is None  # no tenant claim where signoff looks by default: refused
