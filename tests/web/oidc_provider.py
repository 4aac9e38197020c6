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

import httpx

USERS: dict[str, dict[str, Any]] = {
    "fin-lead": {"tenant": "acme", "roles": ["billing-lead"], "name": "Fin Lead"},
    "globex-lead": {"tenant": "globex", "roles": ["billing-lead"]},
    "clerk": {"tenant": "acme", "roles": ["billing"]},
    "no-tenant": {"roles": ["billing-lead"]},
    "padded-tenant": {"tenant": " acme ", "roles": ["billing-lead"]},
    "roles-as-map": {"tenant": "acme", "roles": {"billing-lead": True}},
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
def oidc_provider(token_max_age: int = 3600) -> Iterator[Provider]:
    port = _free_port()
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
