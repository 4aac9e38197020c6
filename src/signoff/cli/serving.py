"""What `signoff serve` runs: the application, then stdio or the HTTP app (``serve.py`` is its
command line)."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import socket
from collections.abc import Callable

from pydantic import ValidationError

from signoff.app import Application
from signoff.audit.keys import KeyRingError, keys_from_env
from signoff.cli.choices import Transport
from signoff.cli.hosting import (
    misconfigured,
    reloading,
    serve_application,
)
from signoff.cli.serve_settings import ServeSettings, settings_problem
from signoff.observability.formats import LogFormat
from signoff.observability.logs import configure_logging
from signoff.observability.observer import OperationsObserver
from signoff.observability.tracing import configure_tracing, shutdown_tracing
from signoff.store.history import history_of
from signoff.surfaces.access.caller import Caller, IdentityError, make_caller
from signoff.surfaces.access.jwt import JwtConfig, JwtConfigError, JwtVerifier
from signoff.surfaces.access.scopes import ScopeConfigError, Scopes
from signoff.surfaces.addresses import is_loopback
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import (
    BearerAuth,
    FixedIdentity,
    HttpAuth,
    HttpOptions,
    authorization_servers,
    build_http_app,
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
from signoff.surfaces.web.links import SharedLinkReceiver
from signoff.surfaces.web.receipts import Receipts
from signoff.surfaces.web.replay import Replaying

logger = logging.getLogger(__name__)


def serve_main(
    *,
    transport: Transport | None,
    host: str | None,
    port: int | None,
    database: str,
    manifests: str,
    principal: str | None,
    tenant: str | None,
    roles: str | None,
    public_url: str | None,
    allowed_host: list[str] | None,
    fixed_identity: bool,
    log_level: str | None,
    log_format: LogFormat | None,
    shutdown_grace: float | None,
    reload: bool,
) -> None:
    """``signoff serve`` with its options (``serve.py``); exits 2 when the configuration is wrong."""
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
            housekeeping_every=settings.housekeeping_every,
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
                "no token verification configured: set SIGNOFF_JWT_ISSUER (the identity "
                "provider, keys by OIDC discovery), SIGNOFF_JWT_JWKS_URL, SIGNOFF_JWT_SECRET, "
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
        lambda app: run_http(app, auth, options, web, notifications, settings, reload),
        notifier=notifications,
        observer=observer,
        housekeeping_every=settings.housekeeping_every,
    )


async def _stdio(
    application: Application, caller: Caller, reload: bool, task_secret: bytes | None
) -> None:
    surface = SignoffMCP(application.runtime, fixed_identity(caller), task_secret=task_secret)
    async with reloading(application, surface, enabled=reload):
        await serve_stdio(surface)


async def run_http(
    application: Application,
    auth: HttpAuth,
    options: HttpOptions,
    web_config: WebConfig,
    notifications: WebNotifications,
    settings: ServeSettings,
    reload: bool,
    *,
    sockets: list[socket.socket] | None = None,
    on_started: Callable[[], None] | None = None,
) -> None:
    """The app: /mcp, plus callbacks, plus the approvers' inbox and API when
    tokens are verified (a fixed test identity has no approvers), plus the operator endpoints
    (``/healthz``, ``/readyz``, ``/metrics``, ``/``); served until SIGTERM or Ctrl-C, then shut
    down gracefully. ``signoff demo`` serves exactly this, on ``sockets`` it bound first."""
    verifier = auth.verifier if isinstance(auth, BearerAuth) else None
    try:
        shared = notifications.check_receivers(application.runtime)
    except SharedLinkReceiver as exc:
        misconfigured(str(exc), exc.code)
    for problem in shared:
        logger.warning("SIGNOFF_SHARED_LINK_RECEIVER=allow: %s", problem)
    notifications.use_links(application.runtime, application.store.links)
    history = history_of(application.store)
    replaying = Replaying(application.registry, history) if history is not None else None
    web = build_web(
        application.runtime,
        web_config,
        verifier,
        notifications,
        receipts=Receipts(application.store),
        replaying=replaying,
    )
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
            sockets=sockets,
            on_started=on_started,
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
