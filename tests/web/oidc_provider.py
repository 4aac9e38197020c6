"""A real OpenID Connect provider process for the single sign-on tests (``oidc-provider-mock``).

Users are predefined with the claims signoff reads (``tenant``, ``roles``); the provider's
authorization page lets a test (or a browser) pick one. Its issuer is ``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

USERS: dict[str, dict[str, Any]] = {
    "fin-lead": {"tenant": "acme", "roles": ["billing-lead"], "name": "Fin Lead"},
    "globex-lead": {"tenant": "globex", "roles": ["billing-lead"]},
    "clerk": {"tenant": "acme", "roles": ["billing"]},
    "no-tenant": {"roles": ["billing-lead"]},
    "padded-tenant": {"tenant": " acme ", "roles": ["billing-lead"]},
    "roles-as-map": {"tenant": "acme", "roles": {"billing-lead": True}},
    # Claims where other providers put them (docs/identity.md): Keycloak's realm roles, an
    # Okta-style groups claim with the scopes as a list.
    "keycloak-lead": {"tenant": "acme", "realm_access": {"roles": ["billing-lead"]}},
    "okta-agent": {"org": "acme", "groups": ["billing"], "scp": ["signoff:propose"]},
}
STARTUP_DEADLINE = 30.0


@dataclass(frozen=True)
class Provider:
    issuer: str
    process: subprocess.Popen[bytes]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def oidc_provider(token_max_age: int = 3600, port: int | None = None) -> Iterator[Provider]:
    """A provider process; each process signs with a key of its own (a new one each start, so
    starting another on the same ``port`` is the provider rotating its key)."""
    port = port or _free_port()
    claims = [json.dumps({"sub": sub, **extra}) for sub, extra in USERS.items()]
    args = [sys.executable, "-m", "oidc_provider_mock", "--port", str(port), "--host", "127.0.0.1"]
    args += ["--token-max-age", str(token_max_age)]
    for claim in claims:
        args += ["--user-claims", claim]
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while True:
            try:
                httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1.0)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the OIDC provider did not start") from None
                time.sleep(0.05)  # waiting for a process to listen, bounded by the deadline
        yield Provider(issuer, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def id_token(issuer: str, sub: str, client_id: str = "signoff-api") -> str:
    """An ID token the provider signs for ``sub``: the code flow, walked as a browser would."""
    redirect = "http://127.0.0.1:9/callback"
    with httpx.Client(base_url=issuer, timeout=STARTUP_DEADLINE) as http:
        chosen = http.post(
            "/oauth2/authorize",
            params={
                "client_id": client_id,
                "redirect_uri": redirect,
                "response_type": "code",
                "scope": "openid",
            },
            data={"sub": sub},
        )
        assert chosen.status_code in (302, 303), chosen.text
        code = parse_qs(urlsplit(chosen.headers["location"]).query)["code"][0]
        answer = http.post(
            "/oauth2/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect,
                "client_id": client_id,
                "client_secret": "any",
            },
        )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["id_token"]
    return token
