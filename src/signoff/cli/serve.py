"""`signoff serve`: the actions as MCP tools over stdio or streamable HTTP.

This module is the command line only (it loads nothing heavy, so ``signoff --help`` stays fast);
``serving.py`` builds and runs the server.
"""

from __future__ import annotations

from typing import Annotated

import typer

from signoff.cli.choices import Transport
from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.observability.formats import LogFormat

PrincipalOption = Annotated[
    str | None,
    typer.Option("--principal", envvar="SIGNOFF_PRINCIPAL", help="stdio: the principal id."),
]
TenantOption = Annotated[
    str | None, typer.Option("--tenant", envvar="SIGNOFF_TENANT", help="stdio: the tenant.")
]
RolesOption = Annotated[
    str | None,
    typer.Option("--roles", envvar="SIGNOFF_ROLES", help="stdio: roles, comma separated."),
]


def serve(
    transport: Annotated[
        Transport | None,
        typer.Option(
            "--transport",
            help="stdio (one local client) or http (/mcp). [env SIGNOFF_TRANSPORT; default stdio]",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="http: address to bind. [env SIGNOFF_HOST; default 127.0.0.1]"),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="http: port to bind. [env SIGNOFF_PORT; default 8000]"),
    ] = None,
    database: DatabaseOption = DEFAULT_DATABASE_URL,
    manifests: ManifestsOption = DEFAULT_MANIFESTS,
    principal: PrincipalOption = None,
    tenant: TenantOption = None,
    roles: RolesOption = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            envvar="SIGNOFF_PUBLIC_URL",
            help="http: the URL clients use to reach this server (default http://HOST:PORT).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option("--allowed-host", help="http: another accepted Host header (name:port)."),
    ] = None,
    fixed_identity: Annotated[
        bool,
        typer.Option(
            "--fixed-identity",
            help=(
                "http, loopback only: skip token checks and act as --principal/--tenant/--roles "
                "for every caller (tests, the conformance suite)."
            ),
        ),
    ] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            help="debug, info, warning, error or critical. [env SIGNOFF_LOG_LEVEL; default info]",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            "--log-format",
            help="text (one readable line per event) or json (one object per line), on stderr. "
            "[env SIGNOFF_LOG_FORMAT; default text]",
        ),
    ] = None,
    shutdown_grace: Annotated[
        float | None,
        typer.Option(
            "--shutdown-grace",
            help="http: seconds SIGTERM waits for calls in flight before exiting. "
            "[env SIGNOFF_SHUTDOWN_GRACE; default 20]",
        ),
    ] = None,
    reload: Annotated[
        bool,
        typer.Option(
            "--reload/--no-reload",
            help="Reload the manifests on SIGHUP or when they change (clients are told).",
        ),
    ] = True,
) -> None:
    """Serve the actions in --manifests as MCP tools.

    stdio: the whole connection acts as --principal/--tenant/--roles (or SIGNOFF_PRINCIPAL,
    SIGNOFF_TENANT, SIGNOFF_ROLES); refuses to start without a principal and a tenant.
    http: streamable HTTP at /mcp; every request needs a bearer JWT (claims sub, tenant, roles,
    scope) verified with the identity provider's keys (SIGNOFF_JWT_ISSUER: OIDC discovery, or
    SIGNOFF_JWT_JWKS_URL), SIGNOFF_JWT_SECRET (HS256), SIGNOFF_JWT_PUBLIC_KEY (RS256 PEM file) or
    SIGNOFF_JWT_JWKS (JWKS file); docs/identity.md. Agents' tokens carry scope signoff:propose, approvers'
    signoff:approve (SIGNOFF_SCOPE_PROPOSE, SIGNOFF_SCOPE_APPROVE); the resource metadata names
    SIGNOFF_AUTHORIZATION_SERVER (default: SIGNOFF_JWT_ISSUER).
    """
    from signoff.cli.serving import serve_main

    serve_main(
        transport=transport,
        host=host,
        port=port,
        database=database,
        manifests=manifests,
        principal=principal,
        tenant=tenant,
        roles=roles,
        public_url=public_url,
        allowed_host=allowed_host,
        fixed_identity=fixed_identity,
        log_level=log_level,
        log_format=log_format,
        shutdown_grace=shutdown_grace,
        reload=reload,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("serve")(serve)
