"""Streamable HTTP at ``/mcp`` as a Starlette app that other surfaces add their routes to.

``/mcp`` answers only requests with a valid bearer JWT (401 with RFC 9728 protected-resource
metadata otherwise), or — for tests and the conformance suite on loopback only — acts as one
fixed, explicitly configured identity. Host and Origin headers are checked against an allow-list
(DNS-rebinding protection). Everything else on the app (the approvals inbox, its JSON API,
callbacks) is mounted by those surfaces through ``routes``/``middleware``/``lifespan``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from signoff.core.runtime import Runtime
from signoff.surfaces.mcp.identity import Caller, bearer_identity, fixed_identity
from signoff.surfaces.mcp.server import SignoffMCP

MCP_PATH = "/mcp"
WELL_KNOWN = "/.well-known/oauth-protected-resource"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class BearerAuth:
    """Verify a bearer token on every ``/mcp`` request.

    ``public_url`` is where clients reach this server (``http://127.0.0.1:8000``); the resource
    metadata names ``public_url + /mcp`` and ``authorization_servers`` (defaults to the token
    issuer when configured, else ``public_url``).
    """

    verifier: TokenVerifier
    public_url: str
    authorization_servers: Sequence[str] = ()


@dataclass(frozen=True)
class FixedIdentity:
    """Every ``/mcp`` request acts as ``caller``. Refused unless the server binds loopback."""

    caller: Caller
    host: str


HttpAuth = BearerAuth | FixedIdentity


@dataclass(frozen=True)
class HttpOptions:
    """``allowed_hosts``: extra ``Host`` values (``name:port`` or ``name:*``) besides loopback and
    the public URL's host."""

    allowed_hosts: Sequence[str] = ()
    allowed_origins: Sequence[str] = ()
    json_response: bool = False
    routes: Sequence[BaseRoute] = ()
    middleware: Sequence[Middleware] = ()
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None
    debug: bool = False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def build_http_app(
    runtime: Runtime, auth: HttpAuth, options: HttpOptions | None = None
) -> Starlette:
    """The ASGI app: ``/mcp``, the protected-resource metadata, and ``options.routes``.

    The ``SignoffMCP`` behind ``/mcp`` is ``app.state.signoff_mcp`` (for reload notifications).
    """
    options = options or HttpOptions()
    if isinstance(auth, FixedIdentity):
        if not is_loopback(auth.host):
            raise ValueError("a fixed HTTP identity is only allowed on a loopback address")
        surface = SignoffMCP(runtime, fixed_identity(auth.caller))
    else:
        surface = SignoffMCP(runtime, bearer_identity)

    manager = StreamableHTTPSessionManager(
        app=surface.server,
        json_response=options.json_response,
        security_settings=_security(auth, options),
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    routes: list[BaseRoute] = []
    if isinstance(auth, BearerAuth):
        resource = AnyHttpUrl(auth.public_url.rstrip("/") + MCP_PATH)
        metadata_url = build_resource_metadata_url(resource)
        endpoint = AuthenticationMiddleware(
            RequireAuthMiddleware(endpoint, [], metadata_url),
            backend=BearerAuthBackend(auth.verifier),
        )
        routes.extend(_metadata_routes(auth, resource))
    routes.insert(0, Route(MCP_PATH, endpoint=endpoint))
    routes.extend(options.routes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            if options.lifespan is None:
                yield
            else:
                async with options.lifespan(app):
                    yield

    app = Starlette(
        debug=options.debug,
        routes=routes,
        middleware=list(options.middleware),
        lifespan=lifespan,
    )
    app.state.signoff_mcp = surface
    return app


def signoff_mcp(app: Starlette) -> SignoffMCP:
    surface = app.state.signoff_mcp
    assert isinstance(surface, SignoffMCP)
    return surface


def _metadata_routes(auth: BearerAuth, resource: AnyHttpUrl) -> list[BaseRoute]:
    servers = list(auth.authorization_servers) or [auth.public_url.rstrip("/")]
    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": str(resource),
            "authorization_servers": servers,
            "resource_name": "signoff",
            "bearer_methods_supported": ["header"],
        }
    )
    handler = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    # RFC 9728 puts the document under the resource path; the bare path serves hosts that
    # look there first.
    return [
        Route(WELL_KNOWN + MCP_PATH, endpoint=handler, methods=["GET", "OPTIONS"]),
        Route(WELL_KNOWN, endpoint=handler, methods=["GET", "OPTIONS"]),
    ]


def _security(auth: HttpAuth, options: HttpOptions) -> TransportSecuritySettings:
    hosts = [f"{name}:*" for name in _LOOPBACK_NAMES] + [*_LOOPBACK_NAMES]
    origins = [f"http://{name}:*" for name in _LOOPBACK_NAMES]
    if isinstance(auth, BearerAuth):
        public = urlsplit(auth.public_url)
        if public.netloc:
            hosts.append(public.netloc)
            origins.append(f"{public.scheme}://{public.netloc}")
    hosts.extend(options.allowed_hosts)
    origins.extend(options.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
