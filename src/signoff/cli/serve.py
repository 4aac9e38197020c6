"""`signoff serve`: the actions as MCP tools over stdio or streamable HTTP."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
from typing import Annotated

import typer
from pydantic import ValidationError

from signoff.app import Application
from signoff.audit.keys import KeyRingError, keys_from_env
from signoff.cli.hosting import (
    misconfigured,
    reloading,
    serve_application,
)
from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.serve_settings import ServeSettings, Transport, settings_problem
from signoff.observability.logs import LogFormat, configure_logging
from signoff.observability.observer import OperationsObserver
from signoff.observability.tracing import configure_tracing, shutdown_tracing
from signoff.surfaces.access.caller import Caller, IdentityError, make_caller
from signoff.surfaces.access.jwt import JwtConfig, JwtConfigError, JwtVerifier
from signoff.surfaces.access.scopes import ScopeConfigError, Scopes
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import (
    BearerAuth,
    FixedIdentity,
    HttpAuth,
    HttpOptions,
    authorization_servers,
    build_http_app,
    is_loopback,
    signoff_mcp,
)
from signoff.surfaces.mcp.identity import fixed_identity
from signoff.surfaces.mcp.server import SignoffMCP
from signoff.surfaces.mcp.serving import serve_http, serve_stdio
from signoff.surfaces.mcp.sessions import SessionLimits
from signoff.surfaces.mcp.tasks import task_secret_from_env
from signoff.surfaces.ops import Health, ops_routes
from signoff.surfaces.ops.metrics import MetricsEndpoint
from signoff.surfaces.web import WebConfig, WebConfigError, WebNotifications, build_web

logger = logging.getLogger(__name__)


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
    scope) verified with SIGNOFF_JWT_SECRET (HS256), SIGNOFF_JWT_PUBLIC_KEY (RS256 PEM file) or
    SIGNOFF_JWT_JWKS (JWKS file). Agents' tokens carry scope signoff:propose, approvers'
    signoff:approve (SIGNOFF_SCOPE_PROPOSE, SIGNOFF_SCOPE_APPROVE); the resource metadata names
    SIGNOFF_AUTHORIZATION_SERVER (default: SIGNOFF_JWT_ISSUER).
    """
    try:
        settings = ServeSettings.resolve(
            transport=transport,
            host=host,
            port=port,
            log_level=log_level,
            log_format=log_format,
            shutdown_grace=shutdown_grace,
        )
    except ValidationError as exc:
        misconfigured(settings_problem(exc))
    host, port = settings.host, settings.port
    configure_logging(settings.log_format, settings.log_level)  # stderr: stdio's stdout is MCP
    if configure_tracing(os.environ):  # only when OTEL_* asks for traces
        atexit.register(shutdown_tracing)
    observer = OperationsObserver(
        log_inputs=settings.log_inputs, trace_payloads=settings.trace_payloads
    )
    try:
        keys_from_env(os.environ)  # housekeeping signs audit checkpoints with it
    except KeyRingError as exc:
        misconfigured(f"cannot start: {exc}", exc.code)
    if settings.transport is Transport.STDIO:
        caller = _caller_or_exit(principal, tenant, roles)
        try:
            secret = task_secret_from_env(os.environ)
        except ValueError as exc:
            misconfigured(str(exc))
        serve_application(
            database,
            manifests,
            lambda app: _stdio(app, caller, reload, secret),
            observer=observer,
        )
        return

    auth: HttpAuth
    jwt_secret: str | None = None
    if fixed_identity:
        if not is_loopback(host):
            misconfigured("--fixed-identity is only allowed with a loopback --host")
        auth = FixedIdentity(_caller_or_exit(principal, tenant, roles), host)
    else:
        try:
            config = JwtConfig.from_env(os.environ)
        except (JwtConfigError, ValueError) as exc:
            misconfigured(str(exc))
        if config is None:
            misconfigured(
                "no token verification configured: set SIGNOFF_JWT_SECRET, "
                "SIGNOFF_JWT_PUBLIC_KEY or SIGNOFF_JWT_JWKS (or use --fixed-identity on loopback)",
                "AUTH_NOT_CONFIGURED",
            )
        jwt_secret = config.secret
        url = public_url or f"http://{_url_host(host)}:{port}"
        try:
            auth = BearerAuth(
                JwtVerifier(config),
                url,
                authorization_servers(os.environ, config.issuer),
                Scopes.from_env(os.environ),
            )
        except ValueError as exc:
            misconfigured(str(exc))
    try:
        web = WebConfig.from_env(
            os.environ, public_url=public_url or f"http://{_url_host(host)}:{port}"
        )
    except (WebConfigError, ScopeConfigError) as exc:
        misconfigured(str(exc))
    try:
        task_secret = task_secret_from_env(os.environ, jwt_secret)
        sessions = SessionLimits.from_env(os.environ)
    except ValueError as exc:
        misconfigured(str(exc))
    if task_secret is None:
        logger.warning(
            "SIGNOFF_TASK_SECRET is not set: MCP task ids are valid for this process only"
        )
    options = HttpOptions(
        allowed_hosts=tuple(allowed_host or ()), task_secret=task_secret, sessions=sessions
    )
    notifications = WebNotifications(web)
    serve_application(
        database,
        manifests,
        lambda app: _http(app, auth, options, web, notifications, settings, reload),
        notifier=notifications,
        observer=observer,
    )


async def _stdio(
    application: Application, caller: Caller, reload: bool, task_secret: bytes | None
) -> None:
    surface = SignoffMCP(application.runtime, fixed_identity(caller), task_secret=task_secret)
    async with reloading(application, surface, enabled=reload):
        await serve_stdio(surface)


async def _http(
    application: Application,
    auth: HttpAuth,
    options: HttpOptions,
    web_config: WebConfig,
    notifications: WebNotifications,
    settings: ServeSettings,
    reload: bool,
) -> None:
    """The app: /mcp, plus callbacks, plus the approvers' inbox and API when
    tokens are verified (a fixed test identity has no approvers), plus the operator endpoints."""
    verifier = auth.verifier if isinstance(auth, BearerAuth) else None
    notifications.use_links(application.runtime, application.store.links)
    web = build_web(application.runtime, web_config, verifier, notifications)
    draining = Draining()
    health = Health(
        application.store,
        lambda: len(application.registry.all()),
        draining,
        timeout=settings.ready_timeout,
        links={"/approvals": "the approvals inbox"} if verifier is not None else {},
    )
    scrape = MetricsEndpoint(application.store, lane=application.runtime.background_usage)
    ops = ops_routes(health, scrape.route())
    options = dataclasses.replace(
        options,
        routes=[*options.routes, *web.routes, *ops],
        lifespan=web.lifespan,
        draining=draining,
    )
    app = build_http_app(application.runtime, auth, options)
    async with reloading(application, signoff_mcp(app), enabled=reload):
        await serve_http(
            app,
            settings.host,
            settings.port,
            log_level=settings.log_level,
            draining=draining,
            grace=settings.shutdown_grace,
            own_logging=True,
        )
        # What is left of the grace SIGTERM started bounds the background work too: queued
        # work stays in the store for the next process, running work is cut off after it.
        await application.runtime.shutdown(draining.remaining(settings.shutdown_grace))


def _caller_or_exit(principal: str | None, tenant: str | None, roles: str | None) -> Caller:
    try:
        return make_caller(principal, tenant, roles)
    except IdentityError as exc:
        misconfigured(f"refusing to start: {exc}", "UNAUTHENTICATED")


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("serve")(serve)
