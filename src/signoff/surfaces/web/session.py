"""Signed inbox sessions and their CSRF tokens.

The cookie is ``base64url(json) "." base64url(HMAC-SHA256(secret, json))``: HttpOnly,
SameSite=Lax, path ``/approvals``. It holds the approver's identity as the verified token named it
(never the token itself), a random session id, a per-session CSRF token and an expiry no later
than the token's. A visitor who has not signed in gets an anonymous session whose CSRF token
protects the sign-in form; signing in issues a new session id and CSRF token (no fixation).
Every POST carries the CSRF token in a hidden field, compared with ``hmac.compare_digest``.

Sign-out clears the cookie and remembers the session id as revoked until it would have expired
(in this process; the short lifetime bounds the rest).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from signoff.core.identity import Principal
from signoff.surfaces.access.caller import Caller

COOKIE_NAME = "signoff_session"
COOKIE_PATH = "/approvals"
ANONYMOUS_TTL_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class Session:
    sid: str
    csrf: str
    expires_at: int
    caller: Caller | None = None

    @property
    def signed_in(self) -> bool:
        return self.caller is not None


class Sessions:
    def __init__(
        self,
        secret: str,
        ttl_seconds: int,
        *,
        secure: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # v2: cookies from before approver scopes were enforced (signed in with any token) are void.
        self._key = hashlib.sha256(b"signoff-session-v2\x00" + secret.encode()).digest()
        self.ttl_seconds = ttl_seconds
        self.secure = secure
        self.clock = clock
        self._revoked: dict[str, int] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ issue
    def anonymous(self) -> Session:
        return Session(
            sid=secrets.token_urlsafe(16),
            csrf=secrets.token_urlsafe(24),
            expires_at=int(self.clock()) + ANONYMOUS_TTL_SECONDS,
        )

    def signed_in(self, caller: Caller, token_expires_at: int | None) -> Session:
        expires = int(self.clock()) + self.ttl_seconds
        if token_expires_at is not None:
            expires = min(expires, token_expires_at)
        return Session(
            sid=secrets.token_urlsafe(16),
            csrf=secrets.token_urlsafe(24),
            expires_at=expires,
            caller=caller,
        )

    # ------------------------------------------------------------------ cookie
    def encode(self, session: Session) -> str:
        data: dict[str, Any] = {"sid": session.sid, "csrf": session.csrf, "exp": session.expires_at}
        if session.caller is not None:
            data["sub"] = session.caller.principal.id
            data["roles"] = list(session.caller.principal.roles)
            data["tenant"] = session.caller.tenant_id
        payload = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(self, value: str | None) -> Session | None:
        """The session a cookie carries, or ``None`` when it is forged, expired or revoked."""
        if not value or "." not in value:
            return None
        body, _, mac = value.partition(".")
        try:
            payload = _unb64(body)
            given = _unb64(mac)
        except (ValueError, binascii.Error):
            return None
        if not hmac.compare_digest(self._mac(payload), given):
            return None
        try:
            data = json.loads(payload)
            session = Session(
                sid=str(data["sid"]),
                csrf=str(data["csrf"]),
                expires_at=int(data["exp"]),
                caller=(
                    Caller(
                        principal=Principal(id=data["sub"], roles=tuple(data["roles"])),
                        tenant_id=str(data["tenant"]),
                    )
                    if "sub" in data
                    else None
                ),
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires_at <= self.clock() or self._is_revoked(session.sid):
            return None
        return session

    def read(self, request: Request) -> Session | None:
        return self.decode(request.cookies.get(COOKIE_NAME))

    def attach(self, response: Response, session: Session, request: Request) -> None:
        response.set_cookie(
            COOKIE_NAME,
            self.encode(session),
            max_age=max(session.expires_at - int(self.clock()), 0),
            path=COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=self.secure or request.url.scheme == "https",
        )

    def clear(self, response: Response, request: Request) -> None:
        response.delete_cookie(
            COOKIE_NAME,
            path=COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=self.secure or request.url.scheme == "https",
        )

    # --------------------------------------------------------------- revoking
    def revoke(self, session: Session) -> None:
        now = int(self.clock())
        with self._lock:
            self._revoked = {sid: exp for sid, exp in self._revoked.items() if exp > now}
            self._revoked[session.sid] = session.expires_at

    def _is_revoked(self, sid: str) -> bool:
        with self._lock:
            return sid in self._revoked

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()


def csrf_matches(session: Session | None, submitted: str | None) -> bool:
    """The form's token equals the session's (constant time); no session, no match."""
    if session is None or not submitted:
        return False
    return hmac.compare_digest(session.csrf.encode(), submitted.encode())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
