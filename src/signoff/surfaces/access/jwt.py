"""Bearer JWTs for the HTTP surface: verify (HS256 secret, RS256 PEM key, JWKS file, the identity
provider's JWKS URL or its OIDC discovery) and mint development tokens.

Claims: ``sub`` (principal id), ``tenant``, ``roles`` (a list of strings), validated exactly,
``exp`` (required); where a provider puts tenant, roles or scopes elsewhere, ``claims.ClaimNames``
maps them. ``aud`` and ``iss`` are checked when configured. One algorithm family per deployment,
fixed by the key material, so a token can never pick its own verification algorithm.

Environment (``JwtConfig.from_env``; docs/identity.md)::

    SIGNOFF_JWT_SECRET       HS256 shared secret (at least 32 bytes)
    SIGNOFF_JWT_PUBLIC_KEY   path to an RS256 public key (PEM)
    SIGNOFF_JWT_JWKS         path to a JWKS file (RS256 keys, chosen by ``kid``)
    SIGNOFF_JWT_JWKS_URL     the provider's JWKS URL, fetched and cached (``jwks.RemoteKeys``)
    SIGNOFF_JWT_ISSUER       expected ``iss``; alone (none of the four above), the JWKS URL is
                             discovered from ISSUER/.well-known/openid-configuration
    SIGNOFF_JWT_AUDIENCE     expected ``aud`` (optional)
    SIGNOFF_JWT_JWKS_CACHE_SECONDS / _REFRESH_SECONDS / _TIMEOUT_SECONDS  remote key tuning
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from signoff.surfaces.access.caller import IdentityError, caller_from_claims
from signoff.surfaces.access.claims import ClaimNames
from signoff.surfaces.access.jwks import (
    DEFAULT_MAX_AGE,
    DEFAULT_MIN_INTERVAL,
    DEFAULT_TIMEOUT,
    JwksUrlError,
    RemoteKeys,
    check_key_url,
)

MIN_SECRET_BYTES = 32
CLOCK_LEEWAY_SECONDS = 5
"""The one leeway for ``exp`` on every surface: ``/mcp`` (whose SDK middleware compares the
``AccessToken``'s ``expires_at`` with the clock itself), ``/api`` and the inbox."""
_CACHE_SIZE = 1024


class JwtConfigError(ValueError):
    """The key configuration is missing, contradictory or unreadable."""


@dataclass(frozen=True)
class JwtConfig:
    """Key material and the optional audience/issuer checks. ``repr`` hides the HS256 secret."""

    secret: str | None = field(default=None, repr=False)
    public_key_pem: str | None = None
    jwks: Mapping[str, Any] | None = None
    jwks_url: str | None = None
    # The JWKS URL found by OIDC discovery from ``issuer`` (no key material given).
    discover: bool = False
    audience: str | None = None
    issuer: str | None = None
    claims: ClaimNames = field(default_factory=ClaimNames)
    jwks_max_age: float = DEFAULT_MAX_AGE
    jwks_min_interval: float = DEFAULT_MIN_INTERVAL
    jwks_timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        given = [
            x is not None for x in (self.secret, self.public_key_pem, self.jwks, self.jwks_url)
        ]
        if sum(given) + self.discover != 1:
            raise JwtConfigError(
                "configure exactly one of SIGNOFF_JWT_SECRET, SIGNOFF_JWT_PUBLIC_KEY, "
                "SIGNOFF_JWT_JWKS, SIGNOFF_JWT_JWKS_URL (or only SIGNOFF_JWT_ISSUER, to discover "
                "the JWKS URL)"
            )
        if self.discover and self.issuer is None:
            raise JwtConfigError("OIDC discovery needs SIGNOFF_JWT_ISSUER")
        if self.secret is not None and len(self.secret.encode()) < MIN_SECRET_BYTES:
            raise JwtConfigError(f"SIGNOFF_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes")
        try:
            if self.jwks_url is not None:
                check_key_url(self.jwks_url, "SIGNOFF_JWT_JWKS_URL")
            if self.discover and self.issuer is not None:
                check_key_url(self.issuer, "SIGNOFF_JWT_ISSUER")
        except JwksUrlError as exc:
            raise JwtConfigError(str(exc)) from exc
        if min(self.jwks_max_age, self.jwks_min_interval, self.jwks_timeout) <= 0:
            raise JwtConfigError("the SIGNOFF_JWT_JWKS_*_SECONDS settings must be positive")

    @property
    def remote(self) -> bool:
        """Whether the keys come from the identity provider over the network."""
        return self.jwks_url is not None or self.discover

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JwtConfig | None:
        """The configuration the environment describes, or ``None`` when it names no key."""
        secret = env.get("SIGNOFF_JWT_SECRET") or None
        key_path = env.get("SIGNOFF_JWT_PUBLIC_KEY") or None
        jwks_path = env.get("SIGNOFF_JWT_JWKS") or None
        jwks_url = env.get("SIGNOFF_JWT_JWKS_URL") or None
        issuer = env.get("SIGNOFF_JWT_ISSUER") or None
        if not any((secret, key_path, jwks_path, jwks_url, issuer)):
            return None
        return cls(
            secret=secret,
            public_key_pem=_read(key_path, "SIGNOFF_JWT_PUBLIC_KEY") if key_path else None,
            jwks=json.loads(_read(jwks_path, "SIGNOFF_JWT_JWKS")) if jwks_path else None,
            jwks_url=jwks_url,
            discover=not any((secret, key_path, jwks_path, jwks_url)),
            audience=env.get("SIGNOFF_JWT_AUDIENCE") or None,
            issuer=issuer,
            claims=ClaimNames.from_env(env),
            jwks_max_age=_seconds(env, "SIGNOFF_JWT_JWKS_CACHE_SECONDS", DEFAULT_MAX_AGE),
            jwks_min_interval=_seconds(
                env, "SIGNOFF_JWT_JWKS_REFRESH_SECONDS", DEFAULT_MIN_INTERVAL
            ),
            jwks_timeout=_seconds(env, "SIGNOFF_JWT_JWKS_TIMEOUT_SECONDS", DEFAULT_TIMEOUT),
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name)
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise JwtConfigError(f"{name} must be a number of seconds, got {text!r}") from None


def _read(path: str, name: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise JwtConfigError(f"{name}: cannot read {path}: {exc.strerror}") from exc


class JwtVerifier:
    """A ``TokenVerifier`` (MCP SDK protocol): a valid token becomes an ``AccessToken``.

    Anything else — bad signature, wrong algorithm, expired, missing or malformed claims — is
    ``None``, which the bearer middleware answers with 401.
    """

    def __init__(
        self,
        config: JwtConfig,
        *,
        clock: Callable[[], float] = time.time,
        remote: RemoteKeys | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        # Verified tokens by their exact text: a client sends the same token on every request,
        # so the signature is checked once and only the expiry on later uses.
        self._verified: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._keys: dict[str | None, Any] = {}
        self.remote: RemoteKeys | None = None
        if config.secret is not None:
            self._algorithm = "HS256"
            self._keys[None] = config.secret
        else:
            self._algorithm = "RS256"
            if config.public_key_pem is not None:
                self._keys[None] = _load_pem(config.public_key_pem)
            elif config.jwks is not None:
                self._keys.update(_load_jwks(config.jwks))
            else:
                self.remote = remote or RemoteKeys(
                    jwks_url=config.jwks_url,
                    issuer=config.issuer if config.discover else None,
                    max_age=config.jwks_max_age,
                    min_interval=config.jwks_min_interval,
                    timeout=config.jwks_timeout,
                )

    def _kid(self, token: str) -> str | None:
        kid = jwt.get_unverified_header(token).get("kid")
        if kid is not None and not isinstance(kid, str):
            raise jwt.InvalidTokenError("kid must be a string")
        return kid

    async def _key_for(self, token: str) -> Any | None:
        if None in self._keys and len(self._keys) == 1:
            return self._keys[None]
        kid = self._kid(token)
        if self.remote is not None:
            return await self.remote.key_for(kid)
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def decode(self, token: str) -> dict[str, Any] | None:
        """The verified claims (tenant, roles and scope where ``config.claims`` says), or
        ``None``."""
        cached = self._verified.get(token)
        if cached is not None:
            if cached["exp"] + CLOCK_LEEWAY_SECONDS > self._clock():
                self._verified.move_to_end(token)
                return cached
            del self._verified[token]
            return None
        claims = await self._verify(token)
        if claims is not None:
            self._verified[token] = claims
            if len(self._verified) > _CACHE_SIZE:
                self._verified.popitem(last=False)
        return claims

    async def _verify(self, token: str) -> dict[str, Any] | None:
        try:
            key = await self._key_for(token)
            if key is None:
                return None
            try:
                verified = self._checked(token, key)
            except jwt.InvalidSignatureError:
                # The provider may have rotated to a key under the same (or no) kid.
                fresh = await self.remote.replaced(self._kid(token), key) if self.remote else None
                if fresh is None:
                    return None
                verified = self._checked(token, fresh)
        except jwt.PyJWTError:
            return None
        claims = self.config.claims.mapped(verified)
        # PyJWT accepts an ``exp`` that int() can parse ("9999999999"); the cache and the SDK
        # need a number.
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            return None
        try:
            caller_from_claims(claims)
        except IdentityError:
            return None
        return claims

    def _checked(self, token: str, key: Any) -> dict[str, Any]:
        verified: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[self._algorithm],
            audience=self.config.audience,
            issuer=self.config.issuer,
            leeway=CLOCK_LEEWAY_SECONDS,
            options={"require": ["exp", "sub"], "verify_aud": self.config.audience is not None},
        )
        return verified

    async def verify_token(self, token: str) -> AccessToken | None:
        claims = await self.decode(token)
        if claims is None:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or claims["sub"]),
            scopes=_scopes(claims),
            # The SDK's bearer middleware refuses once ``expires_at`` has passed, with no
            # leeway of its own: hand it the same deadline this verifier applies.
            expires_at=int(claims["exp"]) + CLOCK_LEEWAY_SECONDS,
            subject=str(claims["sub"]),
            claims=claims,
        )


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    scope = claims.get("scope")
    return scope.split() if isinstance(scope, str) else []


def _load_pem(pem: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(pem.encode())
    except ValueError as exc:
        raise JwtConfigError(f"SIGNOFF_JWT_PUBLIC_KEY is not a PEM public key: {exc}") from exc
    if not isinstance(key, RSAPublicKey):
        raise JwtConfigError("SIGNOFF_JWT_PUBLIC_KEY must be an RSA public key (RS256)")
    return key


def _load_jwks(document: Mapping[str, Any]) -> dict[str | None, Any]:
    try:
        keyset = jwt.PyJWKSet.from_dict(dict(document))
    except jwt.PyJWTError as exc:
        raise JwtConfigError(f"SIGNOFF_JWT_JWKS is not a usable JWKS: {exc}") from exc
    keys = {key.key_id: key.key for key in keyset.keys if key.key_type == "RSA"}
    if not keys:
        raise JwtConfigError("SIGNOFF_JWT_JWKS holds no RSA key")
    return keys


def issue_token(
    secret: str,
    subject: str,
    tenant: str,
    roles: Sequence[str],
    *,
    ttl_seconds: int = 3600,
    audience: str | None = None,
    issuer: str | None = None,
    now: float | None = None,
    scopes: Sequence[str] = (),
) -> str:
    """An HS256 token for demos and tests (production tokens come from your identity provider).

    ``scopes`` become the space-separated OAuth ``scope`` claim: an agent's token carries the
    propose scope, an approver's the approve scope (``signoff.surfaces.access.scopes``).
    """
    issued = int(now if now is not None else time.time())
    claims: dict[str, Any] = {
        "sub": subject,
        "tenant": tenant,
        "roles": list(roles),
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    if scopes:
        claims["scope"] = " ".join(scopes)
    if audience is not None:
        claims["aud"] = audience
    if issuer is not None:
        claims["iss"] = issuer
    return jwt.encode(claims, secret, algorithm="HS256")
