"""What may reach an agent, and how operator detail is made safe to keep (contract §4).

An agent's ``message`` never carries exception text, SQL, paths, URLs, upstream bodies or library
error text: the code and a plain sentence say what happened. The detail an operator needs goes
into ``ExecutionResult.detail``, which is never serialised with the result (so never stored in a
run, never replayed to a duplicate, never answered) and is written only to the run's audit trail,
after ``redact`` has removed credentials from URLs and secret-looking query and key=value
parameters.
"""

from __future__ import annotations

import re

MAX_DETAIL_CHARS = 2000
REDACTED = "***"

# scheme://user:password@host  ->  scheme://***@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@?#]+@")
_SECRET_NAMES = (
    r"(?:api[_\-]?key|apikey|key|token|access[_\-]?token|refresh[_\-]?token|id[_\-]?token|"
    r"secret|client[_\-]?secret|password|passwd|pwd|pass|auth|authorization|signature|sig|"
    r"credential|credentials|session|sessionid)"
)
# ?api_key=...&token=...  and  password=... / Password: ... in DSNs and messages
_QUERY_SECRET = re.compile(
    rf"(?i)(?P<lead>[?&;\s,(]|^)(?P<name>{_SECRET_NAMES})(?P<sep>\s*[=:]\s*)[^&\s#;,)'\"]+"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")


def redact(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` without URL credentials, secret parameters or bearer tokens; bounded."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _QUERY_SECRET.sub(rf"\g<lead>\g<name>\g<sep>{REDACTED}", text)
    if len(text) > limit:
        text = text[:limit] + "…"
    return text


def exception_detail(exc: BaseException) -> str:
    """An exception for the audit trail: its type and redacted text."""
    return redact(f"{type(exc).__name__}: {exc}")
