"""Streamable HTTP at ``/mcp`` as a Starlette app that other surfaces add their routes to.

``/mcp`` answers only requests with a valid bearer JWT whose scope holds the propose scope (401
with RFC 9728 protected-resource metadata without one, 403 ``insufficient_scope`` naming the scope
for a token of the wrong kind), or — for tests and the conformance suite on loopback only — acts as one
fixed, explicitly configured identity. Host and Origin headers are checked against an allow-list
(DNS-rebinding protection). Everything else on the app (the approvals inbox, its JSON API,
callbacks) is mounted by those surfaces through ``routes``/``middleware``/``lifespan``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from signoff.core.runtime import Runtime
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.access.scopes import ScopeRefusal, Scopes
from signoff.surfaces.addresses import is_loopback
from signoff.surfaces.draining import CountRequests, Draining
from signoff.surfaces.mcp.identity import bearer_identity, fixed_identity
from signoff.surfaces.mcp.server import SignoffMCP
from signoff.surfaces.mcp.sessions import FairSessionManager, SessionLimits
from signoff.surfaces.web.http import FaultBarrier, UsableTargets

MCP_PATH = "/mcp"
WELL_KNOWN = "/.well-known/oauth-protected-resource"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class BearerAuth:
    """Verify a bearer token on every ``/mcp`` request.

    ``public_url`` is where clients reach this server (``http://127.0.0.1:8000``); the resource
    metadata names ``public_url + /mcp``, the configured ``authorization_servers`` (where clients
    get tokens: your identity provider, never signoff itself) and ``scopes_supported``.
    """

    verifier: TokenVerifier
    public_url: str
    authorization_servers: Sequence[str] = ()
    scopes: Scopes = field(default_factory=Scopes)


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
    task_secret: bytes | None = field(default=None, repr=False)
    """Keys MCP task ids; the same on every instance (``tasks.task_secret_from_env``)."""
    # Graceful shutdown: in-flight accounting and long-polls that answer when it begins.
    draining: Draining | None = None
    sessions: SessionLimits = field(default_factory=SessionLimits)


def authorization_servers(env: Mapping[str, str], issuer: str | None) -> list[str]:
    """``SIGNOFF_AUTHORIZATION_SERVER`` (comma separated URLs), else the token issuer, else none.

    Raises ``ValueError`` for a value that is not an http(s) URL.
    """
    text = env.get("SIGNOFF_AUTHORIZATION_SERVER") or issuer or ""
    servers = [item.strip() for item in text.split(",") if item.strip()]
    for server in servers:
        if urlsplit(server).scheme not in ("http", "https") or not urlsplit(server).netloc:
            raise ValueError(f"SIGNOFF_AUTHORIZATION_SERVER: not an http(s) URL: {server!r}")
    return servers


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
        surface = SignoffMCP(
            runtime,
            fixed_identity(auth.caller),
            task_secret=options.task_secret,
            draining=options.draining,
        )
    else:
        surface = SignoffMCP(
            runtime, bearer_identity, task_secret=options.task_secret, draining=options.draining
        )

    manager = FairSessionManager(
        app=surface.server,
        json_response=options.json_response,
        security_settings=_security(auth, options),
        limits=options.sessions,
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    routes: list[BaseRoute] = []
    if isinstance(auth, BearerAuth):
        resource = AnyHttpUrl(auth.public_url.rstrip("/") + MCP_PATH)
        metadata_url = build_resource_metadata_url(resource)
        endpoint = AuthenticationMiddleware(
            RequireAgentScope(endpoint, auth.scopes, str(metadata_url)),
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

    middleware = [Middleware(FaultBarrier), *options.middleware]
    if options.draining is not None:
        middleware.insert(0, Middleware(CountRequests, draining=options.draining, skip=MCP_PATH))
    middleware.insert(0, Middleware(UsableTargets))
    app = Starlette(
        debug=options.debug,
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.signoff_mcp = surface
    app.state.session_manager = manager
    return app


def signoff_mcp(app: Starlette) -> SignoffMCP:
    surface = app.state.signoff_mcp
    assert isinstance(surface, SignoffMCP)
    return surface


class RequireAgentScope:
    """``/mcp`` admits a verified token whose scope holds the propose scope.

    No valid token: 401 ``invalid_token``. A valid token without the propose scope (an approver's,
    or one minted for something else): 403 ``insufficient_scope`` naming the scope (RFC 6750).
    Both carry ``resource_metadata`` so a client can discover where to get the right token.
    """

    def __init__(self, app: ASGIApp, scopes: Scopes, resource_metadata: str) -> None:
        self.app = app
        self.scopes = scopes
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            header = (
                'Bearer error="invalid_token", error_description="Authentication required", '
                f'resource_metadata="{self.resource_metadata}"'
            )
            body = {"error": "invalid_token", "error_description": "Authentication required"}
            await _send_json(send, 401, body, header)
            return
        refusal = self.scopes.agent_refusal(user.scopes)
        if refusal is not None:
            await _send_json(
                send, 403, _refusal_body(refusal), refusal.challenge(self.resource_metadata)
            )
            return
        await self.app(scope, receive, send)


def _refusal_body(refusal: ScopeRefusal) -> dict[str, str]:
    return {
        "error": "insufficient_scope",
        "error_description": refusal.description,
        "scope": refusal.scope,
    }


async def _send_json(send: Send, status: int, body: dict[str, str], challenge: str) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def protected_resource_metadata(auth: BearerAuth, resource: AnyHttpUrl) -> dict[str, object]:
    """RFC 9728 metadata. ``authorization_servers`` only when configured: signoff issues no
    tokens, so naming itself would send clients to a 404."""
    document: dict[str, object] = {
        "resource": str(resource),
        "resource_name": "signoff",
        "bearer_methods_supported": ["header"],
        "scopes_supported": auth.scopes.supported,
    }
    if auth.authorization_servers:
        document["authorization_servers"] = [str(AnyHttpUrl(u)) for u in auth.authorization_servers]
    return document


def _metadata_routes(auth: BearerAuth, resource: AnyHttpUrl) -> list[BaseRoute]:
    document = protected_resource_metadata(auth, resource)

    async def metadata(_request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    handler = cors_middleware(metadata, ["GET", "OPTIONS"])
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
