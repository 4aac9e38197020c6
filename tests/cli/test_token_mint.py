"""`signoff token mint`: development tokens for your own roles, only with an explicit development
secret and never where the environment looks like production."""

from __future__ import annotations

import jwt
import pytest
from typer.testing import CliRunner, Result

from signoff.cli import app
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier
from tests.web.support import site_for_tests

SECRET = "a-development-secret-that-is-long-enough"
MINT = ["token", "mint", "--roles", "billing-lead,auditor", "--scope", "approve"]


def _mint(*args: str, **env: str) -> Result:
    clean = {
        name: None
        for name in (
            "SIGNOFF_DEV_JWT_SECRET",
            "SIGNOFF_JWT_ISSUER",
            "SIGNOFF_JWT_JWKS_URL",
            "SIGNOFF_JWT_JWKS",
            "SIGNOFF_JWT_PUBLIC_KEY",
            "SIGNOFF_PUBLIC_URL",
            "SIGNOFF_JWT_AUDIENCE",
        )
    }
    return CliRunner(env={**clean, **env}).invoke(app, list(args))


async def test_a_minted_token_names_the_roles_and_scope_and_a_server_with_the_secret_accepts_it() -> (
    None
):
    minted = _mint(*MINT, "--sub", "lead-9", "--tenant", "acme", SIGNOFF_DEV_JWT_SECRET=SECRET)
    assert minted.exit_code == 0, minted.output
    token = minted.stdout.strip()
    access = await JwtVerifier(JwtConfig(secret=SECRET)).verify_token(token)
    assert access is not None and access.claims is not None
    assert (access.subject, access.claims["tenant"]) == ("lead-9", "acme")
    assert access.claims["roles"] == ["auditor", "billing-lead"]
    assert access.scopes == ["signoff:approve"]
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        site_for_tests(jwt_config=JwtConfig(secret=SECRET)) as site,
        site.client(headers) as http,
    ):
        listed = await http.get("/api/approvals")
    assert listed.status_code == 200


def test_without_an_explicit_development_secret_nothing_is_minted() -> None:
    refused = _mint(*MINT)
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr.strip().endswith("[DEV_TOKEN_REFUSED]")


@pytest.mark.parametrize(
    "env",
    [
        {"SIGNOFF_JWT_ISSUER": "https://login.example.com"},
        {"SIGNOFF_JWT_JWKS_URL": "https://login.example.com/keys"},
        {"SIGNOFF_PUBLIC_URL": "https://signoff.example.com"},
    ],
)
def test_a_production_looking_environment_refuses_even_with_a_secret(env: dict[str, str]) -> None:
    refused = _mint(*MINT, SIGNOFF_DEV_JWT_SECRET=SECRET, **env)
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr.strip().endswith("[DEV_TOKEN_REFUSED]")


def test_a_short_secret_or_both_kinds_of_scope_are_refused() -> None:
    short = _mint(*MINT, "--dev-secret", "short")
    both = _mint(*MINT, "--scope", "propose", SIGNOFF_DEV_JWT_SECRET=SECRET)
    assert short.exit_code == both.exit_code == 2
    assert short.stderr.strip().endswith("[DEV_TOKEN_REFUSED]")
    assert both.stderr.strip().endswith("[INVALID_ARGUMENT]")


def test_a_loopback_public_url_is_development() -> None:
    minted = _mint(*MINT, SIGNOFF_DEV_JWT_SECRET=SECRET, SIGNOFF_PUBLIC_URL="http://127.0.0.1:8000")
    assert minted.exit_code == 0, minted.output
    assert jwt.get_unverified_header(minted.stdout.strip())["alg"] == "HS256"
