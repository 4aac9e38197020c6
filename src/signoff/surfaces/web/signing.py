"""HMAC-SHA256 signatures as sent in ``X-Signoff-Signature: sha256=<hex>``."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Signoff-Signature"
_PREFIX = "sha256="


def signature(secret: str, message: bytes) -> str:
    """The header value for ``message``: ``sha256=`` and the lowercase hex HMAC-SHA256."""
    return _PREFIX + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, message: bytes, header: str | None) -> bool:
    """Constant-time check of a signature header (a missing or malformed one never verifies)."""
    expected = signature(secret, message)
    given = header.strip() if header is not None else ""
    return hmac.compare_digest(expected.encode(), given.encode())
