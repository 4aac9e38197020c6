"""Single sign-on for the inbox: OpenID Connect authorization code flow with PKCE.

``GET /approvals/sso`` sends the browser to the identity provider with a fresh ``state``,
``nonce`` and PKCE ``code_verifier`` (S256), kept for ten minutes in a signed, HttpOnly cookie
scoped to ``/approvals/sso``. ``GET /approvals/sso/callback`` checks ``state``, exchanges the code
(``authlib``'s OAuth 2 client, with the verifier), and verifies the ID token (``pyjwt`` against the
provider's JWKS: signature, ``iss``, ``aud``, ``exp``, ``nonce``). The approver's roles and
tenant come from configurable ID-token claims; a tenant or roles of the wrong shape refuse the
sign-in, and so does a user none of whose roles may approve any action. The session (the same
signed cookie as token sign-in) keeps only identity, roles, tenant and expiry — never a token.

Settings: ``SIGNOFF_OIDC_ISSUER``, ``SIGNOFF_OIDC_CLIENT_ID``, ``SIGNOFF_OIDC_CLIENT_SECRET``,
``SIGNOFF_OIDC_ROLES_CLAIM`` (default ``roles``), ``SIGNOFF_OIDC_TENANT_CLAIM`` (default
``tenant``), ``SIGNOFF_OIDC_SCOPES`` (default ``openid profile email``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core.codes import Code
from signoff.core.runtime import Runtime
from signoff.extras import require
from signoff.surfaces.access.caller import IdentityError, caller_from_claims
from signoff.surfaces.access.claims import claim_at
from signoff.surfaces.web.config import WebConfigError
from signoff.surfaces.web.session import Sessions

log = logging.getLogger("signoff.sso")

START = "/approvals/sso"
CALLBACK = "/approvals/sso/callback"
FLOW_COOKIE = "signoff_sso"
FLOW_TTL_SECONDS = 600


@dataclass(frozen=True)
class OidcConfig:
    """``repr`` hides the client secret."""

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    roles_claim: str = "roles"
    tenant_claim: str = "tenant"
    scopes: str = "openid profile email"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OidcConfig | None:
        issuer = env.get("SIGNOFF_OIDC_ISSUER") or None
        if issuer is None:
            return None
        client_id = env.get("SIGNOFF_OIDC_CLIENT_ID") or ""
        if not client_id:
            raise WebConfigError("SIGNOFF_OIDC_ISSUER needs SIGNOFF_OIDC_CLIENT_ID")
        if not issuer.startswith(("https://", "http://127.0.0.1", "http://localhost")):
            raise WebConfigError("SIGNOFF_OIDC_ISSUER must be https (plain http only on loopback)")
        scopes = env.get("SIGNOFF_OIDC_SCOPES") or "openid profile email"
        if "openid" not in scopes.split():
            raise WebConfigError("SIGNOFF_OIDC_SCOPES must include openid")
        require("sso", "inbox single sign-on (SIGNOFF_OIDC_ISSUER)")
        return cls(
            issuer=issuer.rstrip("/"),
            client_id=client_id,
            client_secret=env.get("SIGNOFF_OIDC_CLIENT_SECRET") or None,
            roles_claim=env.get("SIGNOFF_OIDC_ROLES_CLAIM") or "roles",
            tenant_claim=env.get("SIGNOFF_OIDC_TENANT_CLAIM") or "tenant",
            scopes=scopes,
        )


class SsoRefused(Exception):
    """The sign-in cannot complete; ``code`` and the sentence are shown to the person."""

    def __init__(self, code: str, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True, slots=True)
class _Flow:
    state: str
    nonce: str
    verifier: str
    next_url: str
    expires_at: int


class SingleSignOn:
    def __init__(
        self,
        runtime: Runtime,
        config: OidcConfig,
        sessions: Sessions,
        *,
        public_url: str,
        key: bytes,
        render_refusal: Callable[[Request, SsoRefused], Response],
        client: Callable[[], httpx.AsyncClient] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.sessions = sessions
        self.redirect_uri = f"{public_url.rstrip('/')}{CALLBACK}"
        self._key = hashlib.sha256(b"signoff-sso-flow-v1\x00" + key).digest()
        self._render_refusal = render_refusal
        self._client = client or (lambda: httpx.AsyncClient(timeout=10.0))
        self._clock = clock
        self._metadata: dict[str, Any] | None = None
        self._jwks: jwt.PyJWKSet | None = None

    def routes(self) -> list[BaseRoute]:
        return [
            Route(START, self.start, methods=["GET"]),
            Route(CALLBACK, self.callback, methods=["GET"]),
        ]

    # -------------------------------------------------------------- discovery
    async def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            url = f"{self.config.issuer}/.well-known/openid-configuration"
            async with self._client() as client:
                found = (await client.get(url)).raise_for_status().json()
            if not isinstance(found, dict) or found.get("issuer") != self.config.issuer:
                raise SsoRefused(
                    "SSO_PROVIDER_UNAVAILABLE",
                    "The identity provider's metadata does not match its issuer.",
                    502,
                )
            self._metadata = found
        return self._metadata

    async def _keys(self, refresh: bool = False) -> jwt.PyJWKSet:
        if self._jwks is None or refresh:
            meta = await self.metadata()
            async with self._client() as client:
                self._jwks = jwt.PyJWKSet.from_dict(
                    (await client.get(meta["jwks_uri"])).raise_for_status().json()
                )
        return self._jwks

    # ------------------------------------------------------------------- flow
    async def start(self, request: Request) -> Response:
        from signoff.surfaces.web.inbox import safe_next  # the inbox owns its own paths

        try:
            meta = await self.metadata()
        except (httpx.HTTPError, ValueError, SsoRefused):
            log.warning("sso: the identity provider at %s is unreachable", self.config.issuer)
            return self._render_refusal(
                request,
                SsoRefused(
                    "SSO_PROVIDER_UNAVAILABLE",
                    "The identity provider cannot be reached; try again shortly.",
                    502,
                ),
            )
        flow = _Flow(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),
            next_url=safe_next(request.query_params.get("next")),
            expires_at=int(self._clock()) + FLOW_TTL_SECONDS,
        )
        query = {
            "response_type": "code",
            "client_id": self.config.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": self.config.scopes,
            "state": flow.state,
            "nonce": flow.nonce,
            "code_challenge": _s256_challenge(flow.verifier),
            "code_challenge_method": "S256",
        }
        response = RedirectResponse(
            f"{meta['authorization_endpoint']}?{urlencode(query)}", status_code=303
        )
        response.set_cookie(
            FLOW_COOKIE,
            self._seal(flow),
            max_age=FLOW_TTL_SECONDS,
            path=START,
            httponly=True,
            samesite="lax",
            secure=self.sessions.secure or request.url.scheme == "https",
        )
        return response

    async def callback(self, request: Request) -> Response:
        try:
            caller, expires_at, next_url = await self._complete(request)
        except SsoRefused as refusal:
            response = self._render_refusal(request, refusal)
            response.delete_cookie(FLOW_COOKIE, path=START)
            return response
        session = self.sessions.signed_in(caller, expires_at)
        response = RedirectResponse(next_url, status_code=303)
        self.sessions.attach(response, session, request)
        response.delete_cookie(FLOW_COOKIE, path=START)
        log.info("sso sign-in: %s (tenant %s)", caller.principal.id, caller.tenant_id)
        return response

    async def _complete(self, request: Request) -> tuple[Any, int | None, str]:
        flow = self._open(request.cookies.get(FLOW_COOKIE))
        params = request.query_params
        if flow is None:
            raise SsoRefused(
                "SSO_FLOW_EXPIRED",
                "This sign-in took too long or was started elsewhere; start again.",
                400,
            )
        if "error" in params:
            raise SsoRefused("SSO_DENIED", "The identity provider did not sign you in.", 401)
        if not hmac.compare_digest(params.get("state", "").encode(), flow.state.encode()):
            raise SsoRefused(
                "SSO_STATE_MISMATCH",
                "This sign-in answer does not belong to your browser; start again.",
                400,
            )
        code = params.get("code", "")
        if not code or len(code) > 2048:
            raise SsoRefused("SSO_DENIED", "The identity provider sent no authorization code.", 400)
        claims = await self._exchange(code, flow)
        try:
            # The same claim rules as bearer tokens (one owner), under the configured names.
            caller = caller_from_claims(
                {
                    "sub": claims.get("sub"),
                    "tenant": claim_at(claims, self.config.tenant_claim),
                    "roles": _present_or_empty(claim_at(claims, self.config.roles_claim)),
                }
            )
        except IdentityError:
            raise SsoRefused(
                Code.UNAUTHENTICATED,
                "Your account does not name a valid tenant and roles for signoff; ask your administrator.",
            ) from None
        if not self._may_approve_something(caller.principal.roles):
            raise SsoRefused(
                Code.APPROVER_NOT_ELIGIBLE,
                "You are signed in, but none of your roles may approve any action here.",
                403,
            )
        exp = claims.get("exp")
        return caller, int(exp) if isinstance(exp, int | float) else None, flow.next_url

    async def _exchange(self, code: str, flow: _Flow) -> dict[str, Any]:
        from authlib.integrations.httpx_client import AsyncOAuth2Client  # the sso extra

        meta = await self.metadata()
        try:
            async with AsyncOAuth2Client(
                client_id=self.config.client_id,
                client_secret=self.config.client_secret,
                redirect_uri=self.redirect_uri,
                # A public client (no secret) proves itself with PKCE alone.
                token_endpoint_auth_method=(
                    "client_secret_basic" if self.config.client_secret else "none"
                ),
                timeout=10.0,
            ) as client:
                token = await client.fetch_token(
                    meta["token_endpoint"], code=code, code_verifier=flow.verifier
                )
        except Exception:  # authlib raises its own OAuth errors and httpx's
            log.warning("sso: the code exchange failed", exc_info=True)
            raise SsoRefused(
                "SSO_DENIED", "The identity provider refused the sign-in.", 401
            ) from None
        id_token = token.get("id_token") if isinstance(token, dict) else None
        if not isinstance(id_token, str):
            raise SsoRefused("SSO_DENIED", "The identity provider sent no ID token.", 401)
        claims = await self._verified(id_token)
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), flow.nonce.encode()):
            raise SsoRefused("SSO_DENIED", "The ID token was not issued for this sign-in.", 401)
        return claims

    async def _verified(self, id_token: str) -> dict[str, Any]:
        try:
            kid = jwt.get_unverified_header(id_token).get("kid")
            keys = await self._keys()
            if kid is not None and kid not in {k.key_id for k in keys.keys}:
                keys = await self._keys(refresh=True)  # the provider rotated its keys
            key = keys[kid] if kid is not None else keys.keys[0]
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key=key.key,
                algorithms=["RS256", "ES256", "PS256"],
                audience=self.config.client_id,
                issuer=self.config.issuer,
                options={"require": ["exp", "iat", "sub", "iss", "aud"]},
                leeway=30,
            )
        except (jwt.PyJWTError, KeyError, IndexError, httpx.HTTPError, ValueError):
            raise SsoRefused("SSO_DENIED", "The ID token could not be verified.", 401) from None
        return claims

    def _may_approve_something(self, roles: tuple[str, ...]) -> bool:
        approver_roles = {
            role
            for action in self.runtime.actions()
            for role in action.definition.approval.approver_roles
        }
        return bool(approver_roles.intersection(roles))

    # ----------------------------------------------------------------- cookie
    def _seal(self, flow: _Flow) -> str:
        payload = json.dumps(
            [flow.state, flow.nonce, flow.verifier, flow.next_url, flow.expires_at],
            separators=(",", ":"),
        ).encode()
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def _open(self, value: str | None) -> _Flow | None:
        if not value or "." not in value:
            return None
        body, _, mac = value.partition(".")
        try:
            payload, given = _unb64(body), _unb64(mac)
            if not hmac.compare_digest(
                hmac.new(self._key, payload, hashlib.sha256).digest(), given
            ):
                return None
            state, nonce, verifier, next_url, expires_at = json.loads(payload)
        except (ValueError, TypeError):
            return None
        if not isinstance(expires_at, int) or expires_at <= self._clock():
            return None
        return _Flow(str(state), str(nonce), str(verifier), str(next_url), expires_at)


def _s256_challenge(verifier: str) -> str:
    """PKCE's S256 code challenge, by authlib (imported here: it is the ``sso`` extra)."""
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    return str(create_s256_code_challenge(verifier))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _present_or_empty(roles: Any) -> Any:
    """No roles claim reads as no roles; anything present is validated as it is."""
    return [] if roles is None else roles
