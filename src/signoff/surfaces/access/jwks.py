"""The identity provider's signing keys, fetched from its JWKS URL (or found by OIDC discovery).

``RemoteKeys.key_for(kid)`` answers from a cache; it fetches the key set when it has none, when the
cache is older than ``max_age`` (the provider's normal rotation), and when a token names a ``kid``
the cache does not hold (a rotation the cache has not seen yet). Every fetch, whatever caused it,
is at most one per ``min_interval`` seconds and shared by the requests waiting for it, so tokens
with made-up ``kid`` values cost one request to the provider per interval, not one each. A fetch
that fails (the provider is down, slow past ``timeout``, or answers something that is not a key
set) keeps the keys already held; with none, no token verifies, so requests get 401, never 500.

Discovery: with only an issuer, the JWKS URL is the ``jwks_uri`` of
``ISSUER/.well-known/openid-configuration`` (read once, on the first fetch that needs it), whose
``issuer`` must be exactly the configured one.
Both URLs must be https (plain http only to a loopback address).

PyJWT's ``PyJWKClient`` was the first choice; it does not fit: it fetches with blocking ``urllib``
on the event loop, and it refetches on every unknown ``kid`` with no bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from signoff.surfaces.addresses import is_loopback

log = logging.getLogger("signoff.jwks")

DEFAULT_MAX_AGE = 300.0
DEFAULT_MIN_INTERVAL = 30.0
DEFAULT_TIMEOUT = 5.0
# A key set larger than this is not a key set (a provider publishes a handful of keys).
MAX_BYTES = 256 * 1024


class JwksUrlError(ValueError):
    """A JWKS or issuer URL that would fetch keys over a network in clear, or is not a URL."""


def check_key_url(url: str, name: str) -> str:
    """``url`` if it is https, or http to a loopback address; otherwise ``JwksUrlError``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JwksUrlError(f"{name} must be an https URL, got {url!r}")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise JwksUrlError(f"{name} must use https (plain http only to a loopback address)")
    return url


class RemoteKeys:
    """RSA signing keys by ``kid``, from ``jwks_url`` or discovered from ``issuer``."""

    def __init__(
        self,
        *,
        jwks_url: str | None = None,
        issuer: str | None = None,
        max_age: float = DEFAULT_MAX_AGE,
        min_interval: float = DEFAULT_MIN_INTERVAL,
        timeout: float = DEFAULT_TIMEOUT,
        client: Callable[[], httpx.AsyncClient] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if jwks_url is None and issuer is None:
            raise JwksUrlError("RemoteKeys needs a JWKS URL or an issuer to discover it from")
        self._jwks_url = check_key_url(jwks_url, "SIGNOFF_JWT_JWKS_URL") if jwks_url else None
        self._issuer = check_key_url(issuer, "SIGNOFF_JWT_ISSUER") if issuer else None
        self.max_age = max_age
        self.min_interval = min_interval
        self._client = client or (
            lambda: httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        )
        self._clock = clock
        self._timeout = timeout
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded
        self._tried_at: float | None = None  # the last fetch, whatever its result
        self._running: asyncio.Future[None] | None = None
        self.fetches = 0  # requests sent to the provider (JWKS and discovery), for tests

    async def key_for(self, kid: str | None) -> Any | None:
        """The key a token's ``kid`` names (``None``: the only key), or ``None``."""
        if not self._fresh() or self._pick(kid) is None:
            await self._refresh()
        return self._pick(kid)

    async def replaced(self, kid: str | None, failed: Any) -> Any | None:
        """After a signature did not verify with ``failed``: the key ``kid`` names once the key
        set is fetched again (bounded like every fetch), or ``None`` when it is the same key.
        This is how a rotation reaches tokens that name no ``kid``."""
        await self._refresh()
        key = self._pick(kid)
        return None if key is None or key is failed else key

    def _pick(self, kid: str | None) -> Any | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def _fresh(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at < self.max_age

    def _may_try(self) -> bool:
        return self._tried_at is None or self._clock() - self._tried_at >= self.min_interval

    async def _refresh(self) -> None:
        """Fetch, unless a fetch is under way (then wait for it) or one was tried too recently."""
        running = self._running
        if running is None:
            if not self._may_try():
                return
            self._tried_at = self._clock()
            running = self._running = asyncio.ensure_future(self._fetch_and_keep())
            running.add_done_callback(self._finished)
        # A caller that gives up (its request was cancelled) leaves the fetch to the others.
        await asyncio.shield(running)

    def _finished(self, task: asyncio.Future[None]) -> None:
        if self._running is task:
            self._running = None

    async def _fetch_and_keep(self) -> None:
        try:
            # httpx bounds each phase; this bounds the whole (a provider dripping bytes).
            async with asyncio.timeout(self._timeout * 2):
                keys = await self._fetch()
        except (
            httpx.HTTPError,
            TimeoutError,
            ValueError,
            KeyError,
            TypeError,
            jwt.PyJWTError,
        ) as exc:
            log.warning(
                "cannot fetch the identity provider's keys (%s); %d key(s) kept",
                type(exc).__name__,
                len(self._keys),
                extra={"error": type(exc).__name__, "keys_kept": len(self._keys)},
            )
            return
        self._keys, self._fetched_at = keys, self._clock()

    async def _fetch(self) -> dict[str | None, Any]:
        async with self._client() as client:
            if self._jwks_url is None:
                # Found once: a provider moves its keys, not its key set's address.
                self._jwks_url = await self._discover(client)
            document = await self._get_json(client, self._jwks_url)
        keyset = jwt.PyJWKSet.from_dict(document)
        keys = {key.key_id: key.key for key in keyset.keys if key.key_type == "RSA"}
        if not keys:
            raise ValueError("the key set holds no RSA key")
        return keys

    async def _discover(self, client: httpx.AsyncClient) -> str:
        assert self._issuer is not None
        issuer = self._issuer.rstrip("/")
        metadata = await self._get_json(client, f"{issuer}/.well-known/openid-configuration")
        if metadata.get("issuer") != self._issuer:
            raise ValueError("the discovery document names another issuer")
        return check_key_url(str(metadata["jwks_uri"]), "the discovered jwks_uri")

    async def _get_json(self, client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        self.fetches += 1
        response = await client.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        if len(response.content) > MAX_BYTES:
            raise ValueError("the answer is too large for a key set")
        found = response.json()
        if not isinstance(found, dict):
            raise ValueError("the answer is not a JSON object")
        return found
