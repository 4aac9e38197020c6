"""Inbox single sign-on against a real OpenID provider process: the authorization code flow with
PKCE, claims to identity, refusals for a wrong tenant, no approver role, bad claims, a forged
state, and a session that ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from signoff import Code
from signoff.core.run import RunStatus
from signoff.surfaces.web.session import COOKIE_NAME, Sessions
from signoff.surfaces.web.sso import FLOW_COOKIE, OidcConfig
from tests.web.oidc_provider import Provider, oidc_provider
from tests.web.support import BASE_URL, SESSION_SECRET, Site, site_for_tests, web_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@asynccontextmanager
async def sso_site(provider: Provider, **config: object) -> AsyncIterator[Site]:
    oidc = OidcConfig(issuer=provider.issuer, client_id="signoff-inbox", client_secret="s3cret")
    async with site_for_tests(config=web_config(oidc=oidc, **config)) as site:
        yield site


async def sign_in_as(site: Site, sub: str, *, next_url: str = "/approvals") -> httpx.Response:
    """Walk the flow as a browser would; returns signoff's answer to the callback."""
    browser = site.client()
    started = await browser.get("/approvals/sso", params={"next": next_url})
    assert started.status_code == 303
    authorize = started.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    assert query["redirect_uri"] == [f"{BASE_URL}/approvals/sso/callback"]
    async with httpx.AsyncClient() as idp:
        chosen = await idp.post(authorize, data={"sub": sub})
    assert chosen.status_code in (302, 303), chosen.text
    callback = urlsplit(chosen.headers["location"])
    assert callback.path == "/approvals/sso/callback"
    return await browser.get(f"{callback.path}?{callback.query}")


async def test_an_approver_signs_in_with_sso_and_sees_their_tenants_pending_runs(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        pending = await site.propose()
        answer = await sign_in_as(site, "fin-lead")
        assert answer.status_code == 303 and answer.headers["location"] == "/approvals"
        cookie = answer.cookies.get(COOKIE_NAME)
        assert cookie is not None
        inbox = await site.clients[0].get("/approvals")
    assert inbox.status_code == 200
    assert pending.run_id in inbox.text and "fin-lead" in inbox.text


async def test_the_session_keeps_identity_roles_tenant_and_expiry_and_no_token(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        answer = await sign_in_as(site, "fin-lead")
        value = answer.cookies.get(COOKIE_NAME)
    assert value is not None
    import base64
    import json

    body = value.split(".")[0]
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert set(data) == {"sid", "csrf", "exp", "sub", "roles", "tenant"}
    assert (data["sub"], data["tenant"], data["roles"]) == ("fin-lead", "acme", ["billing-lead"])


async def test_a_user_of_another_tenant_signs_in_but_never_sees_or_decides_this_tenants_runs(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        pending = await site.propose()
        answer = await sign_in_as(site, "globex-lead")
        assert answer.status_code == 303
        browser = site.clients[0]
        inbox = await browser.get("/approvals")
        page = await browser.get(f"/approvals/runs/{pending.run_id}")
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert pending.run_id not in inbox.text
    assert page.status_code == 404
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL


@pytest.mark.parametrize(
    ("sub", "status", "code"),
    [
        ("clerk", 403, Code.APPROVER_NOT_ELIGIBLE),
        ("no-tenant", 401, Code.UNAUTHENTICATED),
        ("padded-tenant", 401, Code.UNAUTHENTICATED),
        ("roles-as-map", 401, Code.UNAUTHENTICATED),
    ],
)
async def test_a_sign_in_the_claims_do_not_support_is_refused_with_a_code(
    provider: Provider, sub: str, status: int, code: str
) -> None:
    async with sso_site(provider) as site:
        answer = await sign_in_as(site, sub)
    assert answer.status_code == status
    assert f"[{code}]" in answer.text
    signed_in = Sessions(SESSION_SECRET, 3600).decode(answer.cookies.get(COOKIE_NAME))
    assert signed_in is None or not signed_in.signed_in


async def test_a_callback_whose_state_was_not_issued_to_this_browser_is_refused(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        victim = site.client()
        started = await victim.get("/approvals/sso")
        async with httpx.AsyncClient() as idp:
            chosen = await idp.post(started.headers["location"], data={"sub": "fin-lead"})
        callback = urlsplit(chosen.headers["location"])
        attacker = site.client()  # no flow cookie: a login-CSRF attempt
        forged = await attacker.get(f"{callback.path}?{callback.query}")
        tampered_state = callback.query.replace("state=", "state=x")
        mismatched = await victim.get(f"{callback.path}?{tampered_state}")
    assert forged.status_code == 400 and "[SSO_FLOW_EXPIRED]" in forged.text
    assert mismatched.status_code == 400 and "[SSO_STATE_MISMATCH]" in mismatched.text


async def test_a_forged_authorization_code_is_refused(provider: Provider) -> None:
    async with sso_site(provider) as site:
        browser = site.client()
        started = await browser.get("/approvals/sso")
        state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]
        answer = await browser.get(
            "/approvals/sso/callback", params={"code": "made-up", "state": state}
        )
    assert answer.status_code == 401 and "[SSO_DENIED]" in answer.text


async def test_an_sso_session_ends_with_the_id_token_and_then_sends_the_approver_to_sign_in() -> (
    None
):
    with oidc_provider(token_max_age=60) as short_lived:
        async with sso_site(short_lived) as site:
            pending = await site.propose()
            answer = await sign_in_as(site, "fin-lead")
            value = answer.cookies.get(COOKIE_NAME)
            assert value is not None
            browser = site.clients[0]
            assert (await browser.get(f"/approvals/runs/{pending.run_id}")).status_code == 200
    now = time.time()
    session = Sessions(SESSION_SECRET, 3600).decode(value)
    assert session is not None and session.expires_at <= now + 61  # the ID token's, not 1 h
    later = Sessions(SESSION_SECRET, 3600, clock=lambda: now + 62)
    assert later.decode(value) is None  # expired: the inbox answers with the sign-in page


async def test_the_sign_in_page_offers_sso_and_marks_token_paste_as_development_only(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        page = await site.client().get("/approvals/sign-in")
    assert 'href="/approvals/sso' in page.text
    assert "Development only" in page.text


def test_oidc_settings_are_validated() -> None:
    from signoff.surfaces.web.config import WebConfigError

    assert OidcConfig.from_env({}) is None
    for env in (
        {"SIGNOFF_OIDC_ISSUER": "https://id.example"},
        {"SIGNOFF_OIDC_ISSUER": "http://id.example", "SIGNOFF_OIDC_CLIENT_ID": "c"},
        {
            "SIGNOFF_OIDC_ISSUER": "https://id.example",
            "SIGNOFF_OIDC_CLIENT_ID": "c",
            "SIGNOFF_OIDC_SCOPES": "email",
        },
    ):
        with pytest.raises(WebConfigError):
            OidcConfig.from_env(env)
    config = OidcConfig.from_env(
        {
            "SIGNOFF_OIDC_ISSUER": "https://id.example/",
            "SIGNOFF_OIDC_CLIENT_ID": "c",
            "SIGNOFF_OIDC_CLIENT_SECRET": "hush-hush",
        }
    )
    assert config is not None and config.issuer == "https://id.example"
    assert "hush-hush" not in repr(config)
    assert FLOW_COOKIE == "signoff_sso"
