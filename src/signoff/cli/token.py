"""`signoff token mint`: a development bearer token for your own roles and scopes.

It signs with an explicit development secret only (``--dev-secret`` or
``SIGNOFF_DEV_JWT_SECRET``; the demo's is ``.signoff-demo/jwt-secret``) and refuses to run where
the environment looks like production: an identity provider configured (``SIGNOFF_JWT_ISSUER``,
``SIGNOFF_JWT_JWKS_URL``, ``SIGNOFF_JWT_JWKS``, ``SIGNOFF_JWT_PUBLIC_KEY``), or a public URL that is
not this machine. A server accepts the token when it verifies with the same secret
(``SIGNOFF_JWT_SECRET``, or the demo). Production tokens come from your identity provider
(docs/identity.md).
"""

from __future__ import annotations

import os
from typing import Annotated
from urllib.parse import urlsplit

import typer

from signoff.cli.plumbing import MISCONFIGURED, fail
from signoff.surfaces.addresses import is_loopback

DEV_SECRET_ENV = "SIGNOFF_DEV_JWT_SECRET"
# Settings that say real tokens come from elsewhere: a development token has no business there.
PRODUCTION_SIGNS = (
    "SIGNOFF_JWT_ISSUER",
    "SIGNOFF_JWT_JWKS_URL",
    "SIGNOFF_JWT_JWKS",
    "SIGNOFF_JWT_PUBLIC_KEY",
)
REFUSED_CODE = "DEV_TOKEN_REFUSED"


def production_signs(env: dict[str, str]) -> list[str]:
    """Why this environment looks like production (empty: it does not)."""
    signs = [name for name in PRODUCTION_SIGNS if env.get(name)]
    public = env.get("SIGNOFF_PUBLIC_URL")
    if public and not is_loopback(urlsplit(public).hostname or ""):
        signs.append("SIGNOFF_PUBLIC_URL (not this machine)")
    return signs


def mint(
    roles: Annotated[
        str, typer.Option("--roles", help="The roles, comma separated (e.g. billing-lead).")
    ],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="propose (an agent's token, for /mcp) or approve (an approver's, for the inbox "
            "and /api), or a literal scope; repeatable.",
        ),
    ],
    sub: Annotated[str, typer.Option("--sub", help="The principal id.")] = "developer",
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant.")] = "demo",
    ttl: Annotated[
        int, typer.Option("--ttl", min=60, max=30 * 24 * 3600, help="Seconds until it expires.")
    ] = 3600,
    audience: Annotated[
        str | None,
        typer.Option("--audience", envvar="SIGNOFF_JWT_AUDIENCE", help="The aud claim, if any."),
    ] = None,
    dev_secret: Annotated[
        str | None,
        typer.Option(
            "--dev-secret",
            envvar=DEV_SECRET_ENV,
            help="The development HS256 secret (at least 32 bytes; prefer the variable).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print a development token (HS256) for --sub in --tenant with --roles and --scope."""
    from signoff.surfaces.access.caller import IdentityError, make_caller
    from signoff.surfaces.access.jwt import MIN_SECRET_BYTES, issue_token
    from signoff.surfaces.access.scopes import ScopeConfigError, Scopes

    signs = production_signs(dict(os.environ))
    if signs:
        fail(
            f"refusing to mint a development token here: {', '.join(signs)} say this is a "
            "production setting (its tokens come from the identity provider)",
            REFUSED_CODE,
            MISCONFIGURED,
        )
    if not dev_secret:
        fail(
            f"a development token needs an explicit development secret: --dev-secret or "
            f"{DEV_SECRET_ENV} (the demo's is in .signoff-demo/jwt-secret)",
            REFUSED_CODE,
            MISCONFIGURED,
        )
    if len(dev_secret.encode()) < MIN_SECRET_BYTES:
        fail(
            f"the development secret must be at least {MIN_SECRET_BYTES} bytes",
            REFUSED_CODE,
            MISCONFIGURED,
        )
    try:
        caller = make_caller(sub, tenant, roles)
        names = Scopes.from_env(os.environ)
    except (IdentityError, ScopeConfigError) as exc:
        fail(str(exc), "INVALID_ARGUMENT", MISCONFIGURED)
    scopes = [{"propose": names.propose, "approve": names.approve}.get(s, s) for s in scope]
    if names.propose in scopes and names.approve in scopes:
        fail(
            "one token is an agent's (propose) or an approver's (approve), never both",
            "INVALID_ARGUMENT",
            MISCONFIGURED,
        )
    typer.echo(
        issue_token(
            dev_secret,
            caller.principal.id,
            caller.tenant_id,
            caller.principal.roles,
            ttl_seconds=ttl,
            audience=audience,
            scopes=scopes,
        )
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    token = typer.Typer(
        rich_markup_mode=None,
        help="Development bearer tokens (production ones come from your identity provider).",
        no_args_is_help=True,
    )
    app.add_typer(token, name="token")
    token.command("mint")(mint)
